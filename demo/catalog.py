"""Static facts the demo draws from: ports, airports, carriers, trade lanes, produce, parties."""
from collections import namedtuple

# offset: the place's usual UTC offset in minutes (kept fixed: the demo ignores daylight saving).
Place = namedtuple("Place", "name country country_code locode offset latitude longitude")

PORTS = {p.name: p for p in (
    Place("Valparaiso", "Chile", "CL", "CLVAP", -180, -33.03, -71.63),
    Place("San Antonio", "Chile", "CL", "CLSAI", -180, -33.59, -71.61),
    Place("Callao", "Peru", "PE", "PECLL", -300, -12.05, -77.15),
    Place("Paita", "Peru", "PE", "PEPAI", -300, -5.08, -81.11),
    Place("Santos", "Brazil", "BR", "BRSSZ", -180, -23.96, -46.30),
    Place("Cape Town", "South Africa", "ZA", "ZACPT", 120, -33.91, 18.43),
    Place("Durban", "South Africa", "ZA", "ZADUR", 120, -29.87, 31.03),
    Place("Tauranga", "New Zealand", "NZ", "NZTRG", 720, -37.65, 176.18),
    Place("Agadir", "Morocco", "MA", "MAAGA", 60, 30.42, -9.64),
    Place("Mombasa", "Kenya", "KE", "KEMBA", 180, -4.06, 39.67),
    Place("Turbo", "Colombia", "CO", "COTRB", -300, 8.09, -76.73),
    Place("Cartagena", "Colombia", "CO", "COCTG", -300, 10.39, -75.53),
    Place("Balboa", "Panama", "PA", "PABLB", -300, 8.95, -79.57),
    Place("Algeciras", "Spain", "ES", "ESALG", 60, 36.13, -5.44),
    Place("Tanger Med", "Morocco", "MA", "MAPTM", 60, 35.89, -5.50),
    Place("Rotterdam", "Netherlands", "NL", "NLRTM", 60, 51.95, 4.14),
    Place("Antwerp", "Belgium", "BE", "BEANR", 60, 51.26, 4.40),
    Place("Vlissingen", "Netherlands", "NL", "NLVLI", 60, 51.44, 3.60),
    Place("Hamburg", "Germany", "DE", "DEHAM", 60, 53.54, 9.97),
)}

AIRPORTS = {p.name: p for p in (
    Place("Santiago", "Chile", "CL", "CLSCL", -180, -33.39, -70.79),
    Place("Lima", "Peru", "PE", "PELIM", -300, -12.02, -77.11),
    Place("Nairobi", "Kenya", "KE", "KENBO", 180, -1.32, 36.93),
    Place("Sao Paulo", "Brazil", "BR", "BRGRU", -180, -23.43, -46.47),
    Place("Amsterdam", "Netherlands", "NL", "NLAMS", 60, 52.31, 4.76),
    Place("Liege", "Belgium", "BE", "BELGG", 60, 50.64, 5.44),
    Place("Frankfurt", "Germany", "DE", "DEFRA", 60, 50.04, 8.56),
    Place("Doha", "Qatar", "QA", "QADOH", 180, 25.27, 51.61),
)}

INLAND = {p.name: p for p in (
    Place("Barendrecht", "Netherlands", "NL", "NLBDR", 60, 51.85, 4.53),
    Place("Venlo", "Netherlands", "NL", "NLVEN", 60, 51.37, 6.17),
    Place("Valencia", "Spain", "ES", "ESVLC", 60, 39.47, -0.38),
    Place("Murcia", "Spain", "ES", "ESMJV", 60, 37.99, -1.13),
    Place("Hamburg", "Germany", "DE", "DEHAM", 60, 53.55, 10.00),
)}

# Ocean carriers: canonical name, SCAC, container owner prefixes, vessels (name, IMO), voyage suffix.
Carrier = namedtuple("Carrier", "name scac prefixes vessels")
OCEAN_CARRIERS = (
    Carrier("Maersk", "MAEU", ("MNBU", "MSKU", "MRKU"),
            (("Maersk Kensington", "9784257"), ("Maersk Stralsund", "9235533"), ("Cap San Lorenzo", "9622227"))),
    Carrier("MSC", "MSCU", ("MSCU", "MEDU", "MSDU"),
            (("MSC Rosaria", "9349485"), ("MSC Lorena", "9467419"), ("MSC Aurora", "9285952"))),
    Carrier("Hapag-Lloyd", "HLCU", ("HLBU", "HLXU"),
            (("Santa Cruz Express", "9784300"), ("Rio Madeira", "9348699"))),
    Carrier("CMA CGM", "CMDU", ("CGMU", "CMAU", "TRIU"),
            (("CMA CGM Andes", "9453597"), ("CMA CGM Tage", "9410727"))),
    Carrier("ONE", "ONEY", ("ONEU", "TCLU"), (("ONE Cygnus", "9806079"), ("Kota Pemimpin", "9628192"))),
    Carrier("Evergreen", "EGLV", ("EGHU", "EMCU"), (("Ever Lambent", "9629079"), ("Ever Lasting", "9629081"))),
    # A reefer operator the tracking feed does not cover: no SCAC on file.
    Carrier("Seatrade", None, ("SZLU", "CAIU"), (("Summer Sky", "9167978"), ("Frio Dolphin", "9017757"))),
)
CARRIERS_BY_NAME = {c.name: c for c in OCEAN_CARRIERS}
UNSUPPORTED_CARRIER = "Seatrade"

# Free days agreed per carrier: (demurrage, detention, basis).  Carriers missing here have no terms.
CARRIER_TERMS = {
    "acme": {"Maersk": (7, 10, "calendar"), "MSC": (5, 7, "calendar"),
             "Hapag-Lloyd": (10, 14, "working")},
    "globex": {"Maersk": (4, 7, "calendar"), "MSC": (6, 6, "calendar")},
}

Airline = namedtuple("Airline", "name prefix iata")
AIRLINES = (
    Airline("LATAM Cargo", "045", "LA"), Airline("KLM Cargo", "074", "KL"),
    Airline("Lufthansa Cargo", "020", "LH"), Airline("Qatar Airways Cargo", "157", "QR"),
    Airline("Air France Cargo", "057", "AF"),
)
ROAD_CARRIERS = ("Transportes Levante S.L.", "Van der Meer Koeltransport B.V.", "Frigo Express GmbH")

# Trade lanes: origin country, ports, airport, produce grown there, exporters.
Lane = namedtuple("Lane", "country ports airport produce exporters transit_days")
LANES = (
    Lane("Chile", ("Valparaiso", "San Antonio"), "Santiago", ("Grape", "Apple", "Avocado", "Blueberry", "Pear"),
         ("Frutícola Andes Sur S.A.", "Exportadora Valle Central Ltda.", "Agrícola Los Robles SpA"), 26),
    Lane("Peru", ("Callao", "Paita"), "Lima", ("Avocado", "Grape", "Mango", "Blueberry"),
         ("Agroexportadora Costa Norte S.A.C.", "Frutas del Pacífico S.A.C."), 22),
    Lane("South Africa", ("Cape Town", "Durban"), None, ("Mandarin", "Orange", "Lemon", "Grape", "Pear"),
         ("Karoo Valley Citrus (Pty) Ltd", "Cape Crest Fruit (Pty) Ltd", "Letaba Estates (Pty) Ltd"), 18),
    Lane("Brazil", ("Santos",), "Sao Paulo", ("Mango", "Lime"), ("Vale do São Francisco Frutas Ltda.",), 16),
    Lane("New Zealand", ("Tauranga",), None, ("Kiwifruit", "Apple"), ("Bay of Plenty Orchards Ltd",), 38),
    Lane("Morocco", ("Agadir",), None, ("Mandarin", "Orange"), ("Souss Primeurs SARL",), 6),
    Lane("Kenya", ("Mombasa",), "Nairobi", ("Avocado", "Mango"), ("Rift Highlands Produce Ltd",), 24),
    Lane("Colombia", ("Turbo",), None, ("Avocado", "Lime"), ("Antioquia Hass S.A.S.",), 14),
)
ROAD_LANE = Lane("Spain", (), None, ("Orange", "Mandarin", "Lemon"),
                 ("Cítricos del Turia S.L.", "Huerta de Murcia S.Coop."), 2)
TRANSSHIPMENT_PORTS = {"Chile": "Balboa", "Peru": "Cartagena", "South Africa": "Algeciras",
                       "Brazil": "Algeciras", "New Zealand": "Balboa", "Kenya": "Tanger Med",
                       "Colombia": "Cartagena", "Morocco": "Algeciras"}

# Per organization: destination ports, airport, warehouse town, own name, customers, notify parties.
Importer = namedtuple("Importer", "ports airport warehouse consignee others notify")
IMPORTERS = {
    "acme": Importer(("Rotterdam", "Antwerp", "Vlissingen"), "Amsterdam", "Barendrecht",
                     "Acme Fresh Imports B.V.", ("FreshMart Retail B.V.", "Acme Fresh UK Ltd"),
                     ("Rotterdam Cool Logistics B.V.", "Kloos Customs Services B.V.")),
    "globex": Importer(("Hamburg", "Antwerp"), "Frankfurt", "Hamburg",
                       "Globex Produce GmbH", ("Nordfrucht Handel GmbH",), ("HHLA Frucht- und Kühlzentrum",)),
}

# Produce: varieties, calibres, box weight (kg), temperature set point, cargo type.
Produce = namedtuple("Produce", "name varieties calibres box_kg temperature cargo_type")
PRODUCE = {p.name: p for p in (
    Produce("Avocado", ("Hass", "Fuerte", "Bacon"), ("12", "14", "16", "18", "20", "22"), 4.0, 5.5, "reefer"),
    Produce("Grape", ("Crimson Seedless", "Thompson Seedless", "Red Globe", "Sweet Celebration"),
            ("L", "XL", "J", "JJ"), 8.2, -0.5, "reefer"),
    Produce("Apple", ("Gala", "Fuji", "Pink Lady", "Granny Smith"), ("70-75", "75-80", "80-85"), 18.0, 0.5, "reefer"),
    Produce("Pear", ("Packham", "Forelle", "Abate Fetel"), ("60", "70", "80", "90"), 12.5, -0.5, "reefer"),
    Produce("Blueberry", ("Duke", "Legacy", "Biloxi"), ("Jumbo", "Super Jumbo"), 1.5, 0.0, "reefer"),
    Produce("Mango", ("Kent", "Keitt", "Tommy Atkins", "Palmer"), ("6", "7", "8", "9", "10"), 4.0, 9.0, "reefer"),
    Produce("Mandarin", ("Nadorcott", "Clemenules", "Orri", "Tango"), ("1XX", "1X", "1", "2", "3"), 10.0, 4.0,
            "reefer"),
    Produce("Orange", ("Navel", "Valencia", "Cara Cara"), ("48", "56", "64", "72", "88"), 15.0, 4.0, "reefer"),
    Produce("Lemon", ("Eureka", "Lisbon", "Verna"), ("88", "100", "113", "138"), 15.0, 10.0, "reefer"),
    Produce("Lime", ("Tahiti",), ("36", "42", "48", "54"), 4.5, 9.0, "reefer"),
    Produce("Kiwifruit", ("Hayward", "SunGold"), ("25", "27", "30", "33", "36"), 3.4, -0.5, "reefer"),
    # Frozen and ambient cargo, so every cargo type appears.
    Produce("Mango pulp", ("Alphonso", "Kent"), ("IQF",), 20.0, -18.0, "frozen"),
    Produce("Coconut", ("Dwarf Green",), ("9", "12", "16"), 12.0, None, "ambient"),
)}
LANE_EXTRAS = {"Brazil": ("Mango pulp", "Coconut"), "Colombia": ("Coconut",)}

# Common names searches should understand ('aguacate' finds avocados).
PRODUCE_ALIASES = (
    ("aguacate", "Avocado"), ("palta", "Avocado"), ("avo", "Avocado"), ("clementine", "Mandarin"),
    ("clementines", "Mandarin"), ("tangerine", "Mandarin"), ("kiwi", "Kiwifruit"), ("uva", "Grape"),
    ("table grapes", "Grape"), ("manzana", "Apple"), ("naranja", "Orange"), ("limon", "Lemon"),
    ("arandano", "Blueberry"), ("blueberries", "Blueberry"),
)

QUALITY = ("Class I", "Class I", "Class I", "Class II", "Extra")
PACK_FORMATS = {4.0: "4 kg open top carton", 8.2: "8.2 kg 10x800 g punnets", 18.0: "18 kg telescopic carton",
                12.5: "12.5 kg carton", 1.5: "12x125 g punnets", 10.0: "10 kg carton", 15.0: "15 kg carton",
                4.5: "4.5 kg carton", 3.4: "3.4 kg single layer tray", 20.0: "20 kg frozen block",
                12.0: "12 kg mesh bag"}
BRANDS = ("Andes Gold", "Cape Crest", "Pacific Sun", "Verde Valle", "Bay Gold", "Acme Select", "Sunridge")

# Label name, colour (None: a label without colour).
LABELS = (
    ("Urgent", "red"), ("Priority customer", "orange"), ("Temperature alarm", "amber"), ("Organic", "green"),
    ("Cold treatment", "teal"), ("Rotterdam hub", "blue"), ("Key account FreshMart", "indigo"),
    ("Promotion", "purple"), ("Samples", "pink"), ("Claims", "gray"), ("Season 2025/26 program", None),
)

# Alert kinds: key, group, customer visible.
ALERT_KINDS = (
    ("eta_drift", "schedule", True), ("vessel_rollover", "schedule", True),
    ("missing_documents", "documents", True), ("demurrage_risk", "free_time", True),
    ("temperature_deviation", "cargo", True), ("tracking_stale", "tracking", True),
    ("parser_low_confidence", "internal", False), ("duplicate_candidate", "internal", False),
)

# Checks: key, category, title.
CHECKS = (
    ("has_commercial_invoice", "documents", "Commercial invoice received"),
    ("has_packing_list", "documents", "Packing list received"),
    ("has_transport_document", "documents", "Bill of lading or air waybill received"),
    ("has_phytosanitary_certificate", "documents", "Phytosanitary certificate received"),
    ("packing_list_totals_match", "cargo", "Packing list totals match the declared totals"),
    ("container_numbers_match", "consistency", "Container numbers match across documents"),
    ("temperature_set_point", "cargo", "Set point suits the produce"),
    ("consignee_matches", "parties", "Consignee is the organization"),
)
