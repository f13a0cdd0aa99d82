"""Malformed metrics.jsonl lines, each with the reason the readers give for skipping it."""

MALFORMED = {
    "not UTF-8 (a latin-1 byte)": (b'{"step": 1, "note": "caf\xe9"}\n', "not UTF-8 text"),
    "not JSON": (b'{"step": 1, "a": 0.\n', "not valid JSON (a line edited by hand, or written "
                                          "by another program?)"),
    "a JSON array": (b"[1, 2, 3]\n", "not a JSON object (a JSON array)"),
    "a JSON number": (b"42\n", "not a JSON object (a JSON number)"),
    "JSON null": (b"null\n", "not a JSON object (a JSON null)"),
    "a JSON string": (b'"step"\n', "not a JSON object (a JSON string)"),
    "no step": (b'{"a": 2.0}\n', 'a record without an integer "step"'),
    "a string step": (b'{"step": "1", "a": 2.0}\n', 'a record without an integer "step"'),
    "a boolean step": (b'{"step": true, "a": 2.0}\n', 'a record without an integer "step"'),
    "a header not an object": (b'{"header": [1]}\n', "a header that is not a JSON object"),
}
