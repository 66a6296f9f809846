"""Documents of a shipment with their files and extracted data, arrival notices and packing lists."""
from demo import files, packing
from demo.plans import DAY, HOUR
from demo.tracking import MINUTE

PDF, CSV = "application/pdf", "text/csv"
XLSM = "application/vnd.ms-excel.sheet.macroEnabled.12"


def add_documents(batch, plan):
    """Queue the shipment's documents, extracted data, arrival notices and packing lists."""
    rng, now = plan.rng, plan.org.now
    plan.document_types = set()
    plan.document_count = 0
    plan.parse_failed = False
    received = min(now - 2 * MINUTE, plan.created + rng.uniform(0.1, 2) * HOUR)
    lists = packing.plan_packing_lists(plan)
    for number, content in enumerate(lists):
        replaced = None
        if content["replaces"] is not None:
            old = content["replaces"]
            replaced = _document(batch, plan, "packing_list", old["filename"], received - 6 * HOUR, record="replaced",
                                 lines=old["text"], data=("packing_list", old["fields"]), csv_rows=old["csv"],
                                 parse="parsed")
            packing.add_packing_list(batch, plan, old, replaced, is_current=False)
        doc = _document(batch, plan, "packing_list", content["filename"], received + number * MINUTE,
                        lines=content["text"], data=("packing_list", content["fields"]), csv_rows=content["csv"],
                        parse="parsed" if content["read"] else "pending")
        if replaced is not None:
            batch.update("documents", replaced, replaced_by_id=doc)
        packing.add_packing_list(batch, plan, content, doc, is_current=True)
    packing.add_loose_pallets(batch, plan)
    if plan.lean:
        _transport_document(batch, plan, received)
        return
    if "no_invoice" not in plan.flags:
        invoice = f"INV-{plan.index:06d}"
        _document(batch, plan, "commercial_invoice", f"Invoice {invoice}.pdf", received + 3 * MINUTE,
                  lines=[f"Invoice {invoice}", f"Seller: {plan.consignor}", f"Buyer: {plan.consignee}"],
                  data=("commercial_invoice", {"invoice_number": invoice, "seller": plan.consignor,
                                               "buyer": plan.consignee, "currency": "USD", "incoterm": "CIF",
                                               "total_amount": round(rng.uniform(18_000, 95_000), 2)}))
    _transport_document(batch, plan, received)
    if plan.lifecycle() != "planned" and plan.mode != "road":
        _document(batch, plan, "phytosanitary_certificate", f"Phyto {plan.lane.country} {plan.index}.pdf",
                  plan.etd + 6 * HOUR, lines=[f"Phytosanitary certificate for {', '.join(plan.produce)}"],
                  data=(None, {}))
    if "reference_only" in plan.flags:
        _document(batch, plan, "other", "email-signature-logo.png", received, record="reference_only",
                  content_type="image/png", raw=b"\x89PNG\r\n\x1a\n" + bytes(64))
    if "page_split" in plan.flags:
        for pages in ("1-2", "3"):
            _document(batch, plan, "other", f"scan-{plan.index}.pdf", received, record="page_split",
                      lines=[f"Pages {pages} of a combined scan"], page_range=pages)
    if "blocked" in plan.flags:
        _document(batch, plan, "packing_list", f"Packing list {plan.index}.xlsm", received + 4 * MINUTE,
                  content_type=XLSM, raw=b"PK\x03\x04 macro-enabled workbook held by the scanner", scan="blocked",
                  parse="failed")
    _arrival_notices(batch, plan)
    if plan.mode == "ocean" and plan.lifecycle() == "done" and rng.random() < 0.3:
        rows = [(plan.container_numbers[0], (plan.etd + i * 6 * HOUR).isoformat(), round(
            (plan.temperature or 0) + rng.uniform(-0.4, 0.4), 1)) for i in range(24)]
        _document(batch, plan, "temperature_log", f"templog_{plan.container_numbers[0]}.csv",
                  min(now, plan.delivered + HOUR), content_type=CSV, csv_rows=(("container", "time", "celsius"), rows),
                  data=(None, {}))


def _transport_document(batch, plan, received):
    name = {"ocean": "bill_of_lading", "air": "air_waybill", "road": "cmr"}[plan.mode]
    reference = plan.transport_reference_input or "unknown"
    if plan.transport_reference_input is None and plan.mode != "road":
        return
    fields = {"ocean": lambda: {"bill_of_lading_number": reference, "shipper": plan.consignor,
                                "consignee": plan.consignee, "port_of_loading": plan.origin.name,
                                "port_of_discharge": plan.destination.name,
                                "container_numbers": list(plan.container_numbers)},
              "air": lambda: {"awb_number": reference, "shipper": plan.consignor, "consignee": plan.consignee,
                              "airport_of_departure": plan.origin.name,
                              "airport_of_destination": plan.destination.name},
              "road": lambda: {}}[plan.mode]()
    _document(batch, plan, name, f"{name.replace('_', ' ').upper()} {plan.index}.pdf", received + 2 * MINUTE,
              lines=[f"{name.replace('_', ' ').title()} {reference}", f"Shipper: {plan.consignor}",
                     f"Consignee: {plan.consignee}"], data=(name if fields else None, fields))


def _arrival_notices(batch, plan):
    """Arrival notices carry free days; the latest received wins."""
    if plan.mode != "ocean" or plan.terms_source != "notice" or plan.lifecycle() == "planned":
        return
    dem, det, basis = plan.free_days
    notices = [(plan.arrival - 2 * DAY, dem, det)]
    if "second_notice" in plan.flags or plan.rng.random() < 0.3:
        notices.insert(0, (plan.arrival - 6 * DAY, max(dem - 3, 1), det))
    for received, days, detention in notices:
        received = min(plan.org.now - HOUR, received)
        doc = _document(batch, plan, "arrival_notice", f"Arrival notice {received:%Y%m%d%H%M}.pdf", received,
                        lines=[f"Free days: {days} demurrage, {detention} detention"],
                        data=("arrival_notice", {"demurrage_free_days": days, "detention_free_days": detention}))
        batch.add("arrival_notices", shipment_id=plan.shipment_id, document_id=doc, received_at=received,
                  demurrage_free_days=days, detention_free_days=detention, free_days_basis=basis)


def _document(batch, plan, kind, filename, created, record="current", lines=(), data=None, csv_rows=None,
              content_type=None, raw=None, scan=None, parse=None, page_range=None):
    """Queue one document (file, data row); returns its local id."""
    rng, now, org = plan.rng, plan.org.now, plan.org
    created = min(now - MINUTE, created)
    plan.document_types.add(kind)
    plan.document_count += 1
    if content_type is None:
        content_type = CSV if csv_rows is not None and rng.random() < 0.3 else PDF
    if content_type == CSV and not filename.endswith(".csv"):
        filename = filename.rsplit(".", 1)[0] + ".csv"
    parse = parse or ("pending" if now - created < 20 * MINUTE else "failed" if rng.random() < 0.03 else "parsed")
    source = "email_upload" if rng.random() < 0.8 else "manual_upload"
    storage_key = scan_state = None
    if "no_file" in plan.flags and kind != "packing_list" or rng.random() < 0.02:
        source, byte_size = "edi", rng.randrange(2_000, 40_000)
    else:
        scan_state = scan or ("scanning" if now - created < 10 * MINUTE or "scanning" in plan.flags else "clean")
        storage_key, byte_size = _store(plan, kind, filename, content_type, lines, csv_rows, raw)
    plan.parse_failed = plan.parse_failed or parse == "failed"
    doc = batch.add("documents", organization_id=org.id, shipment_id=plan.shipment_id, type=kind,
                    filename=filename, content_type=content_type, byte_size=byte_size, source=source,
                    parse_status=parse, page_range=page_range, record_kind=record, storage_key=storage_key,
                    scan_state=scan_state, created_at=created, updated_at=created + rng.uniform(1, 90) * MINUTE
                    if parse != "pending" else created)
    if parse == "parsed" and data is not None:
        schema, fields = data
        batch.add("document_data", document_id=doc, schema=schema, fields=fields, extracted_at=created + MINUTE)
    elif parse == "failed" and rng.random() < 0.5:
        batch.add("document_data", document_id=doc, schema=None, fields={}, extracted_at=created + MINUTE)
    return doc


def _store(plan, kind, filename, content_type, lines, csv_rows, raw):
    """Write the file (or reuse a shared one past the file limit); returns (key, size)."""
    org = plan.org
    if plan.index >= org.file_limit and raw is None:
        key = f"demo/{org.slug}/shared/{kind}.{'csv' if content_type == CSV else 'pdf'}"
        if key not in org.shared_files:
            content = files.csv_text(*csv_rows) if content_type == CSV else files.pdf(
                kind.replace("_", " ").title(), ["Sample document shared by benchmark shipments."])
            org.shared_files[key] = files.write(org.storage_dir, key, content)
        return key, org.shared_files[key]
    if raw is not None:
        content = raw
    elif content_type == CSV:
        content = files.csv_text(*csv_rows)
    else:
        content = files.pdf(filename.rsplit(".", 1)[0], list(lines) + [f"Shipment {plan.reference or plan.index}"])
    # Numbered: two versions of a document may carry the same file name.
    key = f"demo/{org.slug}/{plan.index // 1000:04d}/{plan.index:07d}/{plan.document_count:02d}-" \
          f"{files.safe_name(filename)}"
    return key, files.write(org.storage_dir, key, content)
