"""The words the personal-data detectors (``evidence/detectors.py``) read around a value, per language:
the cues a name follows, the titles, the words that make a street, and the regions a case's languages
and currency say its phone numbers may be from.

Data, not code: the languages are those letters are written in (``jury/locales.py``: en, de, fr, es,
it, pt, nl, pl, sv) and Chinese, as parties write them. A cue is a regular expression, matched case
aside and followed by the name; titles and street words are matched as written.
"""

from __future__ import annotations

# --- names ------------------------------------------------------------------------------------------

# a name follows: an introduction, a signature, a delivery's recipient, a greeting
NAME_CUES: dict[str, tuple[str, ...]] = {
    "en": (
        r"my name is", r"my name's", r"name\s*:", r"full name\s*:", r"signed (?:for )?by", r"received by",
        r"delivered to", r"collected by", r"left with", r"recipient\s*:", r"addressed to", r"contact person\s*:",
        r"(?:kind |best |warm )?regards,?", r"sincerely,?", r"yours (?:sincerely|faithfully|truly),?",
        r"many thanks,", r"thanks,", r"cheers,", r"best wishes,?", r"dear", r"hello", r"hi", r"attn\.?\s*:?",
        r"c/o", r"spoke (?:to|with)",
    ),
    "de": (
        r"mein name ist", r"ich heiße", r"ich heisse", r"name\s*:", r"unterschrieben von", r"empfangen von",
        r"zugestellt an", r"empfänger(?:in)?\s*:", r"ansprechpartner(?:in)?\s*:", r"zu händen(?: von)?",
        r"z\.\s?hd\.?", r"mit freundlichen grüßen,?", r"mit freundlichen grüssen,?", r"freundliche grüße,?",
        r"viele grüße,?", r"liebe grüße,?", r"beste grüße,?", r"herzliche grüße,?", r"grüße,", r"mfg,?",
        r"hallo", r"liebe", r"lieber",
    ),
    "fr": (
        r"je m['’]appelle", r"mon nom est", r"je suis", r"nom\s*:", r"signé par", r"reçu par", r"livré à",
        r"destinataire\s*:", r"à l['’]attention de", r"de la part de", r"(?:bien )?cordialement,?",
        r"bien à vous,?", r"(?:sincères |meilleures )?salutations,?", r"bonjour", r"salut", r"cher", r"chère",
    ),
    "es": (
        r"me llamo", r"mi nombre es", r"soy", r"nombre\s*:", r"firmado por", r"(?:lo )?firmó", r"recibido por", r"entregado a",
        r"destinatario\s*:", r"a la atención de", r"atentamente,?", r"(?:un )?saludos?,?", r"cordialmente,?",
        r"hola", r"estimad[oa]", r"querid[oa]",
    ),
    "it": (
        r"mi chiamo", r"il mio nome è", r"sono", r"nome\s*:", r"firmato da", r"ricevuto da", r"consegnato a",
        r"destinatario\s*:", r"alla cortese attenzione di", r"c\.a\.", r"cordiali saluti,?", r"distinti saluti,?",
        r"saluti,", r"ciao", r"salve", r"gentile", r"car[oa]", r"egregio",
    ),
    "pt": (
        r"meu nome é", r"me chamo", r"chamo-me", r"sou", r"nome\s*:", r"assinado por", r"recebido por",
        r"entregue a", r"destinatário\s*:", r"atenciosamente,?", r"cumprimentos,?", r"abraços?,", r"olá", r"oi",
        r"prezad[oa]",
    ),
    "nl": (
        r"mijn naam is", r"ik heet", r"ik ben", r"naam\s*:", r"ondertekend door", r"ontvangen door",
        r"bezorgd bij", r"geadresseerde\s*:", r"t\.a\.v\.", r"met vriendelijke groet(?:en)?,?",
        r"vriendelijke groet(?:en)?,?", r"hartelijke groet(?:en)?,?", r"groeten,?", r"mvg,?", r"geachte", r"beste",
        r"hallo", r"hoi",
    ),
    "pl": (
        r"nazywam się", r"mam na imię", r"jestem", r"imię i nazwisko\s*:", r"odebrał(?:a)?", r"odebrane przez",
        r"doręczono do", r"odbiorca\s*:", r"z poważaniem,?", r"(?:serdecznie )?pozdrawiam,?", r"pozdrowienia,?",
        r"dzień dobry", r"cześć", r"witam", r"szanown[ya]",
    ),
    "sv": (
        r"jag heter", r"mitt namn är", r"namn\s*:", r"undertecknad av", r"mottagen av", r"mottagare\s*:",
        r"med vänliga hälsningar,?", r"vänliga hälsningar,?", r"hälsningar,?", r"mvh,?", r"hej", r"hejsan", r"kära",
    ),
}  # fmt: skip

# a name follows these in Chinese, with no space between
NAME_CUES_ZH = (
    r"我叫",
    r"我的名字是",
    r"我的名字叫",
    r"本人",
    r"签收人[:：]?",
    r"收件人[:：]?",
    r"联系人[:：]?",
    r"寄件人[:：]?",
)

# a title stays as written before the name it masks
TITLES = (
    "Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Herr", "Frau", "M", "Mme", "Mlle", "Monsieur",
    "Madame", "Sr", "Sra", "Srta", "Don", "Doña", "Dña", "Sig", "Sig.ra", "Signor", "Signora", "Dott", "Dott.ssa",
    "Dhr", "Mevr", "Mw", "Meneer", "Mevrouw", "Pan", "Pani", "Fru", "Dona",
)  # fmt: skip

# lower-case words inside a name: "Sanne de Jong", "Ludwig van Beethoven", "Maria da Silva"
PARTICLES = (
    "van", "von", "der", "den", "de", "del", "della", "dei", "di", "da", "do", "dos", "das", "du", "des", "la", "le",
    "ter", "ten", "te", "zu", "zum", "vom", "y", "e", "bin", "ibn", "al", "el", "'t", "’t",
)  # fmt: skip

# capitalised words a cue is often followed by that name nobody, in any of the languages
NOT_NAMES = frozenset(
    [
        "sir",
        "madam",
        "team",
        "there",
        "all",
        "everyone",
        "seller",
        "buyer",
        "customer",
        "support",
        "service",
        "jury",
        "jurors",
        "the",
        "this",
        "that",
        "we",
        "you",
        "i",
        "courier",
        "shop",
        "store",
        "thanks",
        "thank",
        "please",
        "dhl",
        "ups",
        "fedex",
        "dpd",
        "gls",
        "hermes",
        "usps",
        "amazon",
        "post",
        "office",
        "neighbour",
        "neighbor",
        "reception",
        "concierge",
        "mail",
        "royal",
        "evri",
        "yodel",
        "parcelforce",
        "tnt",
        "inpost",
        "colissimo",
        "chronopost",
        "correos",
        "seur",
        "mrw",
        "poste",
        "postnl",
        "bpost",
        "ctt",
        "correios",
        "sedex",
        "jadlog",
        "sf",
        "ems",
        "ebay",
        "etsy",
        "vinted",
        "zalando",
        "otto",
        "allegro",
        "aliexpress",
        "temu",
        "kunde",
        "kundin",
        "käufer",
        "käuferin",
        "verkäufer",
        "verkäuferin",
        "damen",
        "herren",
        "grüße",
        "gruß",
        "paket",
        "kundenservice",
        "support",
        "händler",
        "monsieur",
        "madame",
        "client",
        "cliente",
        "vendeur",
        "vendeuse",
        "acheteur",
        "mesdames",
        "messieurs",
        "service",
        "señor",
        "señora",
        "vendedor",
        "comprador",
        "signore",
        "signora",
        "venditore",
        "acquirente",
        "cliente",
        "klant",
        "verkoper",
        "koper",
        "heer",
        "mevrouw",
        "meneer",
        "sprzedawca",
        "kupujący",
        "pan",
        "pani",
        "państwo",
        "senhor",
        "senhora",
        "vendedor",
        "comprador",
        "kund",
        "säljare",
        "köpare",
    ]
)
# a signature with one of these is a business's ("Kind regards, Blendmax Store"), not a person's
BUSINESS = frozenset(
    [
        "store",
        "shop",
        "team",
        "support",
        "service",
        "services",
        "ltd",
        "limited",
        "gmbh",
        "inc",
        "llc",
        "co",
        "company",
        "sarl",
        "sas",
        "bv",
        "ag",
        "plc",
        "official",
        "outlet",
        "trading",
        "customer",
        "kg",
        "ohg",
        "ug",
        "mbh",
        "sa",
        "srl",
        "spa",
        "sl",
        "nv",
        "sp",
        "zoo",
        "ltda",
        "eireli",
        "ab",
        "oy",
        "as",
        "aps",
        "kft",
        "sro",
    ]
)

# --- streets ----------------------------------------------------------------------------------------

# a house number, then the street, then this word (English): USPS's street suffixes and the UK's
STREET_SUFFIXES = (
    "Alley", "Avenue", "Ave", "Av", "Branch", "Bridge", "Brook", "Brooks", "Burg", "Burgs", "Bypass", "Camp",
    "Canyon", "Cape", "Causeway", "Center", "Centre", "Centers", "Circle", "Cir", "Circles", "Cliff", "Cliffs",
    "Close", "Club", "Common", "Corner", "Corners", "Course", "Court", "Ct", "Courts", "Cove", "Coves", "Creek",
    "Crescent", "Cres", "Crest", "Crossing", "Crossroad", "Curve", "Dale", "Dam", "Divide", "Drive", "Dr",
    "Drives", "Estate", "Estates", "Expressway", "Extension", "Extensions", "Fall", "Falls", "Ferry", "Field",
    "Fields", "Flat", "Flats", "Ford", "Fords", "Forest", "Forge", "Forges", "Fork", "Forks", "Fort", "Freeway",
    "Garden", "Gardens", "Gateway", "Glen", "Glens", "Green", "Greens", "Grove", "Groves", "Harbor", "Harbour",
    "Harbors", "Haven", "Heights", "Highway", "Hwy", "Hill", "Hills", "Hollow", "Inlet", "Island", "Islands",
    "Isle", "Junction", "Junctions", "Key", "Keys", "Knoll", "Knolls", "Lake", "Lakes", "Land", "Landing", "Lane",
    "Ln", "Light", "Lights", "Loaf", "Lock", "Locks", "Lodge", "Loop", "Mall", "Manor", "Manors", "Meadow",
    "Meadows", "Mews", "Mill", "Mills", "Mission", "Motorway", "Mount", "Mountain", "Mountains", "Neck", "Orchard",
    "Oval", "Overpass", "Parade", "Park", "Parks", "Parkway", "Pkwy", "Parkways", "Pass", "Passage", "Path",
    "Pike", "Pine", "Pines", "Place", "Pl", "Plain", "Plains", "Plaza", "Point", "Points", "Port", "Ports",
    "Prairie", "Radial", "Ramp", "Ranch", "Rapid", "Rapids", "Rest", "Ridge", "Ridges", "River", "Road", "Rd",
    "Roads", "Route", "Row", "Rue", "Run", "Shoal", "Shoals", "Shore", "Shores", "Skyway", "Spring", "Springs",
    "Spur", "Spurs", "Square", "Sq", "Squares", "Station", "Stravenue", "Stream", "Street", "St", "Streets",
    "Summit", "Terrace", "Ter", "Throughway", "Trace", "Track", "Trafficway", "Trail", "Trl", "Tunnel",
    "Turnpike", "Underpass", "Union", "Unions", "Valley", "Valleys", "Via", "Viaduct", "View", "Views", "Village",
    "Villages", "Ville", "Vista", "Walk", "Walks", "Wall", "Way", "Ways", "Well", "Wells", "Wharf", "Yard",
    "Boulevard", "Blvd",
)  # fmt: skip

# a flat, apartment or suite before or after the street (English)
UNITS = ("Flat", "Apartment", "Apt", "Unit", "Suite", "Ste", "Studio", "Room", "Floor", "Fl", "Building", "Bldg")

# the street's word ends its name (German, Dutch, Swedish): "Lindenstraße", "Karl-Marx-Allee", "Dorpsstraat"
STREET_ENDINGS = (
    "straße", "strasse", "str.", "weg", "gasse", "platz", "allee", "ring", "damm", "ufer", "chaussee", "steig",
    "pfad", "markt", "stieg", "graben", "wall", "kamp", "hof", "berg", "park", "promenade", "zeile", "winkel",
    "straat", "laan", "plein", "gracht", "kade", "singel", "dijk", "dreef", "baan", "pad", "steeg", "plantsoen",
    "boulevard", "gatan", "vägen", "väg", "gränd", "torget", "backe", "stig",
)  # fmt: skip
# a German street of two words or an article: "Am Markt 3", "An der Kirche 5", "Unter den Linden 77"
STREET_ARTICLES = (
    "Am",
    "An der",
    "An den",
    "Auf dem",
    "Auf der",
    "Im",
    "In der",
    "Zum",
    "Zur",
    "Unter den",
    "Hinter der",
)

# the street's word comes first (French, Spanish, Italian, Portuguese, Polish): "rue de la Paix",
# "Calle Mayor", "Via Roma", "Rua das Flores", "ul. Kwiatowa": a street with its number, or without one
# when a capitalised name follows ("Rua Gonçalves", "Campo Diego Vargas")
STREET_TYPES = (
    "rue", "avenue", "av.", "boulevard", "bd", "bd.", "chemin", "impasse", "allée", "quai", "route", "cours",
    "faubourg", "Rue", "Avenue", "Boulevard", "Chemin", "Impasse", "Allée", "Quai", "Calle", "C/", "C.", "Avenida",
    "Avda.", "Av.", "Paseo", "Pº", "Carretera", "Ctra.", "Travesía", "Callejón", "Carrer", "Via", "Viale", "Vicolo",
    "Corso", "Piazzale", "Rua", "Travessa", "Alameda", "Rodovia", "Estrada", "Praça", "ulica", "ul.", "aleja",
    "al.", "plac", "pl.", "osiedle", "os.", "Ulica", "Aleja", "Plac", "Osiedle", "Plazuela", "Glorieta", "Ronda",
    "Camino", "Urbanización", "Pasaje", "Pasadizo", "Rambla", "Cuesta", "Acceso", "Cañada", "Vial", "Piazza",
    "Largo", "Strada", "Contrada", "Borgo", "Canale", "Stretto", "Incrocio", "Rotonda", "Lungomare", "Vila",
    "Colônia", "Praia", "Campo", "Lago", "Lagoa", "Vale", "Parque", "Jardim", "Morro", "Feira", "Área", "Setor",
    "Trecho", "Quadra", "Distrito", "Estação", "Aeroporto", "Favela", "Fazenda", "Sítio", "Chácara", "Recanto",
    "Residencial", "Conjunto", "Condomínio", "Núcleo", "Loteamento", "Passarela", "Pátio", "Viaduto", "Vereda",
    "Trevo", "Ladeira", "Esplanada", "Viela", "rondo", "skwer", "bulwar", "Rondo", "Skwer", "Bulwar",
)  # fmt: skip
# and these only with a house number: words English uses too ("the plaza", "Place your order")
STREET_TYPES_NUMBERED = ("place", "square", "Place", "Plaza", "Pza.", "Square")
# what may follow a house number of these countries: "Piso 3", "Puerta 2", "2º B", "Piano 1", "apto 12"
SECONDARY = (
    "Piso", "Puerta", "Planta", "Esc.", "Escalera", "Bajo", "Apt.", "Apto.", "Apto", "Piano", "Interno", "Int.",
    "Scala", "Appartamento", "Bloco", "Casa", "Sala", "Andar", "lok.", "m.", "bis", "ter", "Bus", "bus",
)  # fmt: skip

# an address follows: a street written after one of these is one, street word or not
ADDRESS_CUES = (
    r"my address is", r"address\s*:", r"ship(?:ped)? to", r"send (?:it )?to", r"deliver(?:ed)? to", r"i live at",
    r"meine adresse (?:ist|lautet)", r"adresse\s*:", r"anschrift\s*:", r"lieferadresse\s*:", r"ich wohne in der",
    r"mon adresse est", r"j['’]habite(?: au)?", r"adresse de livraison\s*:", r"mi dirección es", r"dirección\s*:",
    r"vivo en", r"il mio indirizzo è", r"indirizzo\s*:", r"abito in", r"mijn adres is", r"adres\s*:",
    r"ik woon aan de", r"mój adres to", r"mieszkam przy", r"meu endereço é", r"endereço\s*:", r"moro na",
    r"min adress är", r"adress\s*:",
)  # fmt: skip

# --- phone regions ----------------------------------------------------------------------------------

# where a number written without its country code may be from when the case is in this language
LANGUAGE_REGIONS: dict[str, tuple[str, ...]] = {
    "en": ("GB", "US", "IE", "CA", "AU"),
    "de": ("DE", "AT", "CH"),
    "fr": ("FR", "BE", "CH", "LU"),
    "es": ("ES", "MX", "AR", "CO"),
    "it": ("IT", "CH"),
    "pt": ("PT", "BR"),
    "nl": ("NL", "BE"),
    "pl": ("PL",),
    "sv": ("SE", "FI"),
    "zh": ("CN", "TW", "HK"),
    "da": ("DK",),
    "nb": ("NO",),
    "no": ("NO",),
    "fi": ("FI",),
    "cs": ("CZ",),
    "ja": ("JP",),
}
# and when the order was paid in this currency (the euro: its largest members; a case's language picks the rest)
CURRENCY_REGIONS: dict[str, tuple[str, ...]] = {
    "GBP": ("GB",),
    "USD": ("US",),
    "EUR": ("DE", "FR", "IT", "ES", "NL", "BE", "AT", "PT", "IE"),
    "PLN": ("PL",),
    "BRL": ("BR",),
    "CHF": ("CH",),
    "SEK": ("SE",),
    "NOK": ("NO",),
    "DKK": ("DK",),
    "CZK": ("CZ",),
    "HUF": ("HU",),
    "RON": ("RO",),
    "CNY": ("CN",),
    "HKD": ("HK",),
    "JPY": ("JP",),
    "CAD": ("CA",),
    "AUD": ("AU",),
    "NZD": ("NZ",),
    "MXN": ("MX",),
    "INR": ("IN",),
    "TRY": ("TR",),
    "ZAR": ("ZA",),
}
