"""Document, DocumentData and the fields of the `packing_list` extraction schema."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, UtcDateTime, doc


class LenientNumber(fields.Field):
    """A number taken from extracted data; a value that is not a number is null rather than an error."""

    def __init__(self, integer=False, **kwargs):
        self.integer = integer
        kwargs.setdefault("allow_none", True)
        super().__init__(**kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        if isinstance(value, bool):
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        if number != number or number in (float("inf"), float("-inf")):
            return None
        if self.integer:
            return int(number) if number.is_integer() else None
        return number


class LenientString(fields.String):
    """A string taken from extracted data; numbers become text, objects and lists become null."""

    def _serialize(self, value, attr, obj, **kwargs):
        if isinstance(value, (dict, list, bool)):
            return None
        return super()._serialize(value, attr, obj, **kwargs)


def _text(description):
    return LenientString(allow_none=True, metadata=doc(description))


class PackingListLineItemSchema(Schema):
    pallet_number = _text("Pallet number.")
    produce_name = _text("Produce name.")
    variety = _text("Variety.")
    size_calibre = _text("Size or calibre.")
    quality_category = _text("Quality category.")
    format = _text("Pack format.")
    label = _text("Label (brand).")
    produce_type = _text("Produce type.")
    ggn = _text("GLOBALG.A.P. number.")
    number_of_boxes = LenientNumber(integer=True, metadata=doc("Number of boxes.", type="integer"))
    net_weight_kg = LenientNumber(metadata=doc("Net weight in kilograms.", type="number"))
    box_weight_kg = LenientNumber(metadata=doc("Weight of one box in kilograms.", type="number"))
    gross_weight_kg = LenientNumber(metadata=doc("Gross weight in kilograms.", type="number"))


class PackingListFieldsSchema(Schema):
    """The fields extracted from a packing list; a field the extraction did not find is null."""

    packing_list_number = _text("Packing list number.")
    exporter_name = _text("Exporter name.")
    exporter_port = _text("Exporter port.")
    exporter_country = _text("Exporter country.")
    importer_name = _text("Importer name.")
    importer_country = _text("Importer country.")
    total_net_weight = LenientNumber(metadata=doc("Total net weight in kilograms.", type="number"))
    total_boxes = LenientNumber(integer=True, metadata=doc("Total number of boxes.", type="integer"))
    diagram_pallet_numbers = fields.List(fields.Raw(), metadata=doc("Pallet numbers of the loading diagram."))
    container_number = _text("Container number.")
    line_items = fields.List(fields.Nested(PackingListLineItemSchema), metadata=doc("Lines of the packing list."))


class DocumentSchema(Schema):
    object = fields.Constant("document", metadata=doc("Always `document`."))
    id = Id("doc")
    shipment_id = Id("shp", "The shipment the document belongs to.")
    type = fields.String(metadata=doc("Kind of document (for example `packing_list`); open list."))
    filename = fields.String(metadata=doc("File name."))
    content_type = fields.String(metadata=doc("Media type of the file."))
    byte_size = fields.Integer(metadata=doc("Size of the file in bytes."))
    source = fields.String(metadata=doc("How the document arrived (for example `email_upload`); open list."))
    parse_status = fields.String(metadata=doc("State of data extraction (for example `parsed`); open list."))
    downloadable = fields.Boolean(metadata=doc("True when the file can be fetched from the file endpoint."))
    page_range = fields.String(allow_none=True, metadata=doc("Pages of the original file this document covers."))
    data_available = fields.Boolean(metadata=doc("Whether extracted data exists."))
    created_at = UtcDateTime(metadata=doc("When the document was received."))
    updated_at = UtcDateTime(metadata=doc("When the document last changed."))


class ExtractedFields(fields.Field):
    """A (schema, fields) pair dumped as the fields: shaped for schema `packing_list`, else as stored."""

    def _serialize(self, value, attr, obj, **kwargs):
        schema, stored = value or (None, None)
        if schema is None or not stored:
            return {}
        if schema == "packing_list":
            return PackingListFieldsSchema().dump(_packing_list_fields(stored))
        return stored


def _packing_list_fields(value):
    """Every documented key present (null when missing); lists that are not lists become empty."""
    shaped = {name: value.get(name) for name in PackingListFieldsSchema().fields}
    for name in ("diagram_pallet_numbers", "line_items"):
        if not isinstance(shaped[name], list):
            shaped[name] = []
    shaped["line_items"] = [
        {name: item.get(name) for name in PackingListLineItemSchema().fields}
        for item in shaped["line_items"] if isinstance(item, dict)]
    return shaped


class DocumentDataSchema(Schema):
    object = fields.Constant("document_data", metadata=doc("Always `document_data`."))
    document_id = Id("doc", "The document the data was extracted from.")
    type = fields.String(metadata=doc("Kind of document."))
    schema = fields.String(allow_none=True, metadata=doc(
        "Name of the extraction schema (for example `packing_list`); null when nothing was extracted."))
    # Named through data_key: a Schema's own `fields` attribute holds its field objects. The
    # value is the (schema, fields) pair, since a field's serialisation sees only its own value.
    extracted_fields = ExtractedFields(data_key="fields", attribute="extracted", metadata=doc(
        "Extracted fields; `{}` when nothing was extracted or the type has no structured schema. "
        "For schema `packing_list` they are the PackingListFields object.",
        anyOf=[{"$ref": "#/components/schemas/PackingListFields"}, {"type": "object"}]))
