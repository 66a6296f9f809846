"""Packing lists: pallets and lines, the packing-list document's extracted fields and its CSV."""
import zlib

from demo import catalog, codes

CSV_HEADER = ("pallet_number", "produce", "variety", "calibre", "quality", "format", "label", "ggn", "boxes",
              "box_weight_kg", "net_weight_kg", "gross_weight_kg")


def plan_packing_lists(plan):
    """One packing list per container (one per shipment by air or road), each with pallets and lines."""
    rng = plan.rng
    read = "parse_pending" not in plan.flags and not (plan.status == "draft" and rng.random() < 0.5)
    plan.packing_read = read
    groups = list(range(plan.containers)) if plan.mode == "ocean" else [None]
    company = zlib.crc32(plan.consignor.encode()) % 10_000_000
    lists = []
    for n, container in enumerate(groups):
        number = f"PL{plan.created:%y}{plan.index:06d}{n + 1:02d}"
        content = _content(plan, number, container, company, serial=n * 100)
        content["read"] = read
        content["replaces"] = None
        if read and n == 0 and "replaced_pl" in plan.flags:
            old = _content(plan, number, container, company, serial=n * 100, version=1)
            old["read"], old["replaces"] = True, None
            content["replaces"] = old
        lists.append(content)
    return lists


def _pallet_count(plan):
    if "big" in plan.flags:
        return 20
    if plan.lean:
        return 4 if plan.mode != "air" else 2
    if plan.mode == "ocean":
        return plan.rng.randint(18, 20)
    return plan.rng.randint(2, 6) if plan.mode == "air" else plan.rng.randint(8, 12)


def _lines_per_pallet(plan):
    if "big" in plan.flags:
        return 10
    if plan.lean:
        return 1
    roll = plan.rng.random()
    return 1 if roll < 0.7 else 2 if roll < 0.95 else 3


def _content(plan, number, container, company, serial, version=2):
    rng = plan.rng
    container_number = plan.container_numbers[container] if container is not None else None
    ggn = codes.ggn(rng)
    brand = rng.choice(catalog.BRANDS)
    pallets = []
    for p in range(_pallet_count(plan)):
        pallet_number = codes.sscc(company, plan.index * 1000 + serial + p)
        lines = []
        count = _lines_per_pallet(plan)
        for i in range(count):
            produce = catalog.PRODUCE[rng.choice(plan.produce)]
            boxes = max(1, round(rng.uniform(800, 1000) / produce.box_kg / count))
            if version == 1 and p == 0:
                boxes += 6  # the corrected version fixed this pallet's count
            organic = "organic" in plan.flags and rng.random() < 0.6
            net = round(boxes * produce.box_kg, 3)
            lines.append({
                "line_index": i + 1, "produce_name": produce.name,
                "produce_type": "Organic" if organic else "Conventional",
                "variety": rng.choice(produce.varieties), "calibre": rng.choice(produce.calibres),
                "quality_category": rng.choice(catalog.QUALITY), "pack_format": catalog.PACK_FORMATS[produce.box_kg],
                "label": brand, "ggn": ggn, "organic": organic, "box_count": boxes,
                "box_weight_kg": produce.box_kg, "net_weight_kg": net,
                "gross_weight_kg": round(net + boxes * 0.6 + 25 / count, 3)})
        pallets.append({"pallet_number": pallet_number, "lines": lines})
    boxes = sum(ln["box_count"] for p in pallets for ln in p["lines"])
    net = round(sum(ln["net_weight_kg"] for p in pallets for ln in p["lines"]), 3)
    declared_boxes = boxes + 12 if "totals_mismatch" in plan.flags else boxes
    importer = plan.org.importer
    fields = {
        "packing_list_number": number, "exporter_name": plan.consignor, "exporter_port": plan.origin.name,
        "exporter_country": plan.lane.country if plan.mode != "road" else "Spain",
        "importer_name": plan.consignee, "importer_country": catalog.PORTS[importer.ports[0]].country,
        "total_net_weight": net, "total_boxes": declared_boxes,
        "diagram_pallet_numbers": [p["pallet_number"] for p in pallets],
        "container_number": container_number or "",
        "line_items": [{"pallet_number": p["pallet_number"], "produce_name": ln["produce_name"],
                        "variety": ln["variety"], "size_calibre": ln["calibre"],
                        "quality_category": ln["quality_category"], "format": ln["pack_format"],
                        "label": ln["label"], "produce_type": ln["produce_type"], "ggn": ln["ggn"],
                        "number_of_boxes": ln["box_count"], "net_weight_kg": ln["net_weight_kg"],
                        "box_weight_kg": ln["box_weight_kg"], "gross_weight_kg": ln["gross_weight_kg"]}
                       for p in pallets for ln in p["lines"]],
    }
    csv_rows = [(p["pallet_number"], ln["produce_name"], ln["variety"], ln["calibre"], ln["quality_category"],
                 ln["pack_format"], ln["label"], ln["ggn"], ln["box_count"], ln["box_weight_kg"],
                 ln["net_weight_kg"], ln["gross_weight_kg"]) for p in pallets for ln in p["lines"]]
    suffix = "" if version == 2 else " (superseded)"
    return {"reference": number, "container": container, "pallets": pallets, "declared_boxes": declared_boxes,
            "declared_net": net, "fields": fields, "csv": (CSV_HEADER, csv_rows),
            "filename": f"Packing list {number}{' v1' if version == 1 else ''}.pdf",
            "text": [f"Packing list {number}{suffix}", f"Exporter: {plan.consignor}", f"Container: {container_number}",
                     f"Pallets: {len(pallets)}  Boxes: {declared_boxes}  Net kg: {net}"]}


def add_packing_list(batch, plan, content, document, is_current):
    """Queue a packing list with its pallets and lines (nothing when the document has not been read)."""
    if not content["read"]:
        return None
    container = plan.container_ids[content["container"]] if content["container"] is not None else None
    packing_list = batch.add("packing_lists", organization_id=plan.org.id, shipment_id=plan.shipment_id,
                             document_id=document, container_id=container, reference=content["reference"],
                             declared_box_count=content["declared_boxes"],
                             declared_net_weight_kg=content["declared_net"], is_current=is_current,
                             created_at=plan.created)
    for pallet in content["pallets"]:
        _add_pallet(batch, plan, pallet, packing_list, container)
    return packing_list


def _add_pallet(batch, plan, pallet, packing_list, container):
    pallet_id = batch.add("pallets", shipment_id=plan.shipment_id, packing_list_id=packing_list,
                          container_id=container, pallet_number=pallet["pallet_number"])
    for line in pallet["lines"]:
        batch.add("packing_lines", pallet_id=pallet_id, shipment_id=plan.shipment_id, **line)


def add_loose_pallets(batch, plan):
    """Pallets counted at the warehouse that no packing list mentions."""
    if "loose_pallet" not in plan.flags:
        return
    produce = catalog.PRODUCE[plan.produce[0]]
    container = plan.container_ids[0] if plan.container_ids else None
    line = {"line_index": 1, "produce_name": produce.name, "produce_type": "Conventional",
            "variety": produce.varieties[0], "calibre": produce.calibres[0], "quality_category": "Class II",
            "pack_format": catalog.PACK_FORMATS[produce.box_kg], "label": "", "ggn": "", "organic": False,
            "box_count": 40,
            "box_weight_kg": produce.box_kg, "net_weight_kg": round(40 * produce.box_kg, 3),
            "gross_weight_kg": round(40 * produce.box_kg + 49, 3)}
    _add_pallet(batch, plan, {"pallet_number": f"LOOSE-{plan.index}", "lines": [line]}, None, container)
