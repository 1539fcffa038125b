#!/usr/bin/env bash
# Rebuild README.md from its sections (docs/readme_head.md, docs/readme/*.md, docs/readme_tail.md).
set -euo pipefail
cd "$(dirname "$0")/.."
{
  cat docs/readme_head.md
  for part in training losses data resampling tasks sweeps analysis experiments infra reliability performance; do
    [ -f "docs/readme/$part.md" ] && { echo; cat "docs/readme/$part.md"; }
  done
  echo
  cat docs/readme_tail.md
} > README.md
