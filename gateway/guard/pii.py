"""Personal data found by Microsoft Presidio's predefined recognisers: e-mail addresses, phone
numbers (python-phonenumbers), card numbers (Luhn-checked by Presidio's CreditCardRecognizer),
IBANs (their check digits), IP addresses and the national ids Presidio validates.

Only pattern recognisers are used, called directly: no NLP engine, so no spaCy model is loaded or
downloaded, and Presidio (which imports spaCy) is imported on the first pii check only, never by a
process whose groups have none. The e-mail recogniser validates a domain with tldextract, which
would fetch the public suffix list from the internet: here it reads the snapshot tldextract ships.
A result below `MIN_SCORE` (Presidio's "weak" patterns, such as nine bare digits for a US social
security number without its context words) is not a finding; of overlapping results the
stronger, then the longer, is kept."""

from __future__ import annotations

import threading

MIN_SCORE = 0.4

# Presidio's entity -> the recogniser class that finds it (in presidio_analyzer.predefined_recognizers)
RECOGNIZERS = {
    "EMAIL_ADDRESS": "EmailRecognizer", "PHONE_NUMBER": "PhoneRecognizer", "CREDIT_CARD": "CreditCardRecognizer",
    "IBAN_CODE": "IbanRecognizer", "IP_ADDRESS": "IpRecognizer", "US_SSN": "UsSsnRecognizer",
    "US_ITIN": "UsItinRecognizer", "US_PASSPORT": "UsPassportRecognizer", "UK_NHS": "NhsRecognizer",
    "UK_NINO": "UkNinoRecognizer", "ES_NIF": "EsNifRecognizer", "ES_NIE": "EsNieRecognizer",
    "IT_FISCAL_CODE": "ItFiscalCodeRecognizer", "PL_PESEL": "PlPeselRecognizer",
    "FI_PERSONAL_IDENTITY_CODE": "FiPersonalIdentityCodeRecognizer", "IN_AADHAAR": "InAadhaarRecognizer",
    "IN_PAN": "InPanRecognizer", "SG_NRIC_FIN": "SgFinRecognizer", "AU_TFN": "AuTfnRecognizer",
    "CRYPTO": "CryptoRecognizer", "MAC_ADDRESS": "MacAddressRecognizer",
}

_recognizers: dict[str, object] = {}
_lock = threading.Lock()


def _offline_email_recognizer(predefined):
    """Presidio's e-mail recogniser, its domains checked against tldextract's bundled snapshot."""
    import tldextract

    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)

    class OfflineEmailRecognizer(predefined.EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return extract(pattern_text).fqdn != ""

    return OfflineEmailRecognizer()


def recognizer(entity: str):
    """The recogniser of `entity`, made (and Presidio imported) on first use."""
    found = _recognizers.get(entity)
    if found is not None:
        return found
    with _lock:
        if entity not in _recognizers:
            from presidio_analyzer import predefined_recognizers as predefined

            if entity == "EMAIL_ADDRESS":
                _recognizers[entity] = _offline_email_recognizer(predefined)
            else:
                _recognizers[entity] = getattr(predefined, RECOGNIZERS[entity])()
        return _recognizers[entity]


def ready(entities: tuple[str, ...]) -> bool:
    """Whether the recognisers of `entities` are made: the first use imports Presidio and spaCy (most of a
    second), which the caller does on a worker thread rather than in the event loop."""
    return all(entity in _recognizers for entity in entities)


def find(text: str, entities: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """The spans of `text` holding one of `entities`, without overlaps, in order."""
    results = []
    for entity in entities:
        for result in recognizer(entity).analyze(text, [entity], None):
            if result.entity_type == entity and result.score >= MIN_SCORE and result.end > result.start:
                results.append(result)
    kept: list = []
    for result in sorted(results, key=lambda r: (-r.score, r.start - r.end, r.start)):
        if all(result.end <= k.start or result.start >= k.end for k in kept):
            kept.append(result)
    return sorted((r.start, r.end, r.entity_type) for r in kept)
