"""The natural-language query of each entity type for `mrc_ner` (BERT-MRC asks one question per type).

Written for this project in the style BERT-MRC uses (a short annotation-guideline description of the type,
which the paper found to work better than a bare type name). `task.queries` picks a set by name
("conll03", "ontonotes5", "msra", "ontonotes4"), maps types to queries ({PER: "..."}), or is "auto": the
English sets looked up by type name, and a generic question for any other type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dicelab.errors import ConfigError

CONLL03 = {
    "PER": "find the people in the text: names of persons, including first names, surnames and nicknames.",
    "LOC": "find the locations in the text: countries, cities, regions, rivers, mountains and other places.",
    "ORG": "find the organizations in the text: companies, teams, parties, institutions and agencies.",
    "MISC": "find the other named entities in the text: nationalities, events, languages, products, titles.",
}

ONTONOTES5 = {
    "PERSON": "find the people in the text, real or fictional, named by their names.",
    "NORP": "find the nationalities, religious groups and political groups in the text.",
    "FAC": "find the facilities in the text: buildings, airports, highways, bridges and other structures.",
    "ORG": "find the organizations in the text: companies, agencies, institutions and other groups.",
    "GPE": "find the geopolitical entities in the text: countries, states, provinces and cities.",
    "LOC": "find the non-political locations in the text: mountain ranges, bodies of water, regions.",
    "PRODUCT": "find the products in the text: vehicles, weapons, foods and other objects, not services.",
    "EVENT": "find the named events in the text: hurricanes, battles, wars, sports events.",
    "WORK_OF_ART": "find the titles of books, songs, films, paintings and other works in the text.",
    "LAW": "find the named documents made into laws in the text: acts, treaties, constitutions.",
    "LANGUAGE": "find the named languages in the text.",
    "DATE": "find the dates and periods in the text, absolute or relative.",
    "TIME": "find the times of day and durations shorter than a day in the text.",
    "PERCENT": "find the percentages in the text, including the percent sign or word.",
    "MONEY": "find the monetary values in the text, including the unit.",
    "QUANTITY": "find the measurements in the text: weights, distances and other quantities with a unit.",
    "ORDINAL": "find the ordinal numbers in the text: first, second, third and so on.",
    "CARDINAL": "find the numbers in the text that are not another type of number.",
}

# Chinese sets: MSRA as the BERT-MRC data names its types (NR person, NS place, NT organization) and with
# the PER / LOC / ORG names other copies use; Chinese OntoNotes 4 (PER, LOC, ORG, GPE).
MSRA = {
    "NR": "找出文本中的人名，包括姓名、字号和昵称。",
    "NS": "找出文本中的地名，包括国家、城市、山川、河流等地理位置。",
    "NT": "找出文本中的机构名，包括公司、政府部门、学校、团体等组织。",
    "PER": "找出文本中的人名，包括姓名、字号和昵称。",
    "LOC": "找出文本中的地名，包括国家、城市、山川、河流等地理位置。",
    "ORG": "找出文本中的机构名，包括公司、政府部门、学校、团体等组织。",
}

ONTONOTES4 = {
    "PER": "找出文本中的人名，包括真实和虚构的人物。",
    "LOC": "找出文本中的非行政区划地点，如山脉、河流、湖泊和地区。",
    "ORG": "找出文本中的组织机构，如公司、政府部门、学校和团体。",
    "GPE": "找出文本中的行政区划，如国家、省份、城市和县镇。",
}

QUERY_SETS: dict[str, dict[str, str]] = {
    "conll03": CONLL03,
    "ontonotes5": ONTONOTES5,
    "msra": MSRA,
    "ontonotes4": ONTONOTES4,
}


def generic_query(entity_type: str) -> str:
    return f"find the {entity_type.lower().replace('_', ' ')} entities in the text."


def entity_queries(setting: str | Mapping[str, str], entity_types: Sequence[str]) -> dict[str, str]:
    """The query of every type: from the named set, the mapping, or (for "auto") by type name.

    A named set or a mapping must cover every type of the data: a type without its query is a config error.
    """
    if isinstance(setting, str) and setting != "auto":
        if setting not in QUERY_SETS:
            allowed = ", ".join(["auto", *QUERY_SETS])
            raise ConfigError(
                f"config key 'task.queries': unknown query set {setting!r} (allowed: {allowed})"
            )
        setting = QUERY_SETS[setting]
    if isinstance(setting, str):  # auto
        return {
            kind: CONLL03.get(kind) or ONTONOTES5.get(kind) or generic_query(kind) for kind in entity_types
        }
    missing = [kind for kind in entity_types if not str(setting.get(kind, "")).strip()]
    if missing:
        raise ConfigError(f"config key 'task.queries': no query for entity type {missing[0]!r}")
    return {kind: str(setting[kind]) for kind in entity_types}
