#!/usr/bin/env bash
# Builds gaffer's sandbox image: the base from Debian's packages (build-base.sh), then
# the Dockerfile on top with the tool server and the packages it imports. Idempotent:
# an image built from the same tool code is kept.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PYTHON="${PYTHON:-python3}"   # a Python with gaffer installed (make passes the venv's)
IMAGE="${IMAGE:-gaffer-sandbox:latest}"
BASE="${BASE:-gaffer-sandbox-base:latest}"

if ! docker info >/dev/null 2>&1; then
    echo "cannot reach the Docker daemon: install docker.io and start dockerd" >&2
    exit 1
fi
bash "$HERE/build-base.sh" "$BASE"

HASH="$("$PYTHON" -c 'from workers.sandbox.image import image_hash; print(image_hash())')"
if [ "$(docker image inspect "$IMAGE" --format '{{index .Config.Labels "gaffer.tools"}}' 2>/dev/null)" = "$HASH" ]; then
    echo "sandbox image $IMAGE is up to date"
    exit 0
fi

CONTEXT="$(mktemp -d /tmp/gaffer-image.XXXXXX)"
trap 'rm -rf "$CONTEXT"' EXIT
cp "$HERE/Dockerfile" "$CONTEXT/"
cp -r "$ROOT/workers" "$CONTEXT/workers"
find "$CONTEXT/workers" -name '__pycache__' -prune -exec rm -rf {} +

# The tool code's imports, at the versions installed here, as wheels for the image's Python.
IMAGE_PY="$(docker run --rm --network none "$BASE" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
ARCH="$(uname -m)"
mapfile -t REQUIREMENTS < <("$PYTHON" - <<'PY'
from importlib.metadata import version
for name in ("pydantic", "pydantic-core", "annotated-types", "typing-extensions",
             "typing-inspection", "tree-sitter", "tree-sitter-bash"):
    print(f"{name}=={version(name)}")
PY
)
"$PYTHON" -m pip install --quiet --no-deps --only-binary=:all: --target "$CONTEXT/site" \
    --python-version "$IMAGE_PY" --implementation cp \
    --platform "manylinux_2_17_$ARCH" --platform "manylinux2014_$ARCH" --platform "manylinux_2_28_$ARCH" \
    "${REQUIREMENTS[@]}"

if ! docker build --network none --build-arg "BASE=$BASE" --build-arg "TOOLS_HASH=$HASH" \
    -t "$IMAGE" "$CONTEXT" >"$CONTEXT/build.log" 2>&1; then
    cat "$CONTEXT/build.log" >&2
    exit 1
fi
echo "built $IMAGE (tools $HASH)"
