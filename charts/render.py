#!/usr/bin/env python3
"""Renders a Helm chart offline with the Helm v4 library (PyPI: helm-python-sdk), for the chart tests.

    render.py CHART_DIR RELEASE NAMESPACE [VALUES_JSON]

Prints one JSON object: {"templates": {path: rendered text}, "crds": [{"filename", "data"}],
"lint": [{"severity", "path", "error"}]} (lint: `helm lint --strict` with the same values; severity 1 =
info, 2 = warning, 3 = error).
Exit status 3 when the library is missing (the message says how to install it), 1 on a render error.
"""

import json
import sys


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import helm_python as helm
    except ImportError as e:
        print(
            f"cannot import helm_python ({e}): install the Helm v4 library with "
            "`python3 -m pip install helm-python-sdk` (.ci/run does)",
            file=sys.stderr,
        )
        return 3
    chart_dir, release, namespace = sys.argv[1:4]
    values = json.loads(sys.argv[4]) if len(sys.argv) == 5 else None
    try:
        with helm.Chart.load(chart_dir) as chart:
            templates = chart.render(values, name=release, namespace=namespace, is_install=True)
            crds = [{"filename": c["filename"], "data": c["data"]} for c in chart.crds]
        report = helm.lint(chart_dir, values, strict=True, namespace=namespace)
        lint = report.get("messages", []) + [
            {"severity": 3, "path": "", "error": e} for e in report.get("errors", [])
        ]
    except helm.HelmError as e:
        print(f"helm could not render {chart_dir}: {e}", file=sys.stderr)
        return 1
    json.dump({"templates": templates, "crds": crds, "lint": lint}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
