#!/usr/bin/python3
"""Fetches flamebpf's /metrics and reads it with python3-prometheus-client's parser, the one
Prometheus' Python tooling uses. That parser is lenient, so the rules it lets pass are checked
here too: the body ends in a newline, every name is a valid metric name, every sample's family
has HELP and TYPE lines before it, label values are escaped. Prints one line per sample,
"name<TAB>labels as JSON<TAB>value"; exits 1 with the reason on the first violation.
Usage: read_metrics.py URL [TOKEN]"""
import json
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def main():
    request = urllib.request.Request(sys.argv[1])
    if len(sys.argv) > 2:
        request.add_header("Authorization", "Bearer " + sys.argv[2])
    with urllib.request.urlopen(request, timeout=30) as response:
        content_type = response.headers.get("Content-Type", "")
        body = response.read().decode("utf-8")
    if not content_type.startswith("text/plain; version=0.0.4"):
        sys.exit("Content-Type is " + content_type)
    if not body.endswith("\n"):
        sys.exit("the text does not end in a newline")
    described = {}
    for line in body.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name = line.split(" ")[2]
            if not NAME.match(name):
                sys.exit("invalid metric name: " + name)
            described.setdefault(name, set()).add(line[2:6])
        elif line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if described.get(name) != {"HELP", "TYPE"}:
                sys.exit("sample before its HELP and TYPE: " + line)
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if not NAME.match(sample.name):
                sys.exit("invalid sample name: " + sample.name)
            print("%s\t%s\t%r" % (sample.name, json.dumps(sample.labels, sort_keys=True), sample.value))


if __name__ == "__main__":
    main()
