"""PackingList with its pallets and lines."""
from marshmallow import Schema, fields

from rendering.schemas.fields import Id, Number, doc


class PackingLineSchema(Schema):
    object = fields.Constant("packing_line", metadata=doc("Always `packing_line`."))
    id = Id("pln")
    line_index = fields.Integer(metadata=doc("One-based position of the line on its pallet."))
    produce_name = fields.String(metadata=doc("Produce name."))
    produce_type = fields.String(metadata=doc("Produce type."))
    variety = fields.String(metadata=doc("Variety."))
    calibre = fields.String(metadata=doc("Size or calibre."))
    quality_category = fields.String(metadata=doc("Quality category."))
    pack_format = fields.String(metadata=doc("Pack format."))
    label = fields.String(metadata=doc("Label (brand) on the boxes."))
    ggn = fields.String(metadata=doc("GLOBALG.A.P. number."))
    box_count = fields.Integer(metadata=doc("Number of boxes."))
    box_weight_kg = Number(metadata=doc("Weight of one box in kilograms."))
    net_weight_kg = Number(metadata=doc("Net weight in kilograms."))
    gross_weight_kg = Number(metadata=doc("Gross weight in kilograms."))


class PalletSchema(Schema):
    object = fields.Constant("pallet", metadata=doc("Always `pallet`."))
    id = Id("plt")
    pallet_number = fields.String(metadata=doc("Pallet number as written on the packing list."))
    container_id = Id("ctr", "The container the pallet is in; null when not known.", allow_none=True)
    lines = fields.List(fields.Nested(PackingLineSchema), metadata=doc("Lines, by line_index."))


class PackingListTotalsSchema(Schema):
    pallets = fields.Integer(metadata=doc("Pallets on the packing list."))
    boxes = fields.Integer(metadata=doc("Boxes on its lines."))
    net_weight_kg = Number(metadata=doc("Net weight of its lines in kilograms."))


class PackingListSchema(Schema):
    object = fields.Constant("packing_list", metadata=doc("Always `packing_list`."))
    id = Id("pkl")
    shipment_id = Id("shp", "The shipment.")
    document_id = Id("doc", "The document the packing list was read from; null when not known.", allow_none=True)
    container_id = Id("ctr", "The container it covers; null when not known.", allow_none=True)
    reference = fields.String(metadata=doc("Packing list number."))
    declared_box_count = fields.Integer(metadata=doc("Box count the document declares."))
    declared_net_weight_kg = Number(metadata=doc("Net weight the document declares, in kilograms."))
    totals = fields.Nested(PackingListTotalsSchema, metadata=doc("Totals computed from the pallets and lines."))
    pallets = fields.List(fields.Nested(PalletSchema), metadata=doc("Pallets, oldest first."))
