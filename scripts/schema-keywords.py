#!/usr/bin/env python3
"""How often JSON Schema keywords the constraint engine does not implement occur in the JSONSchemaBench
sample: per keyword, the schemas that use it and its occurrences (a `format` value counts under its name).

    python3 scripts/schema-keywords.py [data/jsonschemabench/with_tests]

Keywords are counted where a schema can stand (reached from the root through subschema keywords), so a
property called `not`, or a `format` inside Snowplow's `self` metadata, is not counted.
"""
import collections
import glob
import json
import os
import sys

UNIMPLEMENTED = [
    "not", "if", "then", "else", "uniqueItems", "dependencies", "dependentRequired", "dependentSchemas",
    "propertyNames", "contains", "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef",
]
# Formats llguidance implements; any other `format` is counted by name.
ENGINE_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
# Where a subschema can stand: maps of subschemas, lists of them, and single ones. Anything else (`self`,
# vendor keys, `enum` values) is data, not schema.
MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
LISTS = {"allOf", "anyOf", "oneOf", "prefixItems", "items"}
SINGLE = {"items", "additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then",
          "else", "unevaluatedProperties", "unevaluatedItems"}


def walk(schema, found):
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in UNIMPLEMENTED:
            found[key] += 1
        if key == "format" and isinstance(value, str) and value not in ENGINE_FORMATS:
            found[f"format: {value}"] += 1
        if key in MAPS and isinstance(value, dict):
            for child in value.values():
                walk(child, found)
        if key in LISTS and isinstance(value, list):
            for child in value:
                walk(child, found)
        if key in SINGLE and isinstance(value, dict):
            walk(value, found)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../data/jsonschemabench/with_tests")
    occurrences, schemas = collections.Counter(), collections.Counter()
    files = sorted(glob.glob(os.path.join(directory, "*.json")))
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        found = collections.Counter()
        walk(doc.get("schema", doc), found)
        occurrences.update(found)
        schemas.update(found.keys())
    print(f"{len(files)} schemas\n")
    print("| keyword | schemas | occurrences |\n|---|---|---|")
    for key, n in sorted(schemas.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| `{key}` | {n} | {occurrences[key]} |")


if __name__ == "__main__":
    main()
