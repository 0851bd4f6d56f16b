# moto, the local EC2 of the AWS kit (kit/aws/moto.ts), with boto3 for its seed: a virtualenv from
# PyPI with the pins of kit/aws/moto/requirements.txt, keyed by their hash. Its python is the
# "program": kit/aws/moto.ts runs our plug-in launcher with it.
MOTO_REQUIREMENTS="$REPO_ROOT/kit/aws/moto/requirements.txt"
MOTO_DIR="$CACHE_ROOT/moto-$(sources_hash "$MOTO_REQUIREMENTS")"
program moto "$MOTO_DIR/bin/python" VENEER_MOTO_PYTHON build_moto

build_moto() {
  drop_stale moto- "$MOTO_DIR"
  # Made under another name and moved in place once complete, so that a half-made virtualenv never
  # counts as built. Python finds its packages from pyvenv.cfg beside bin/, which moves with it (the
  # bin/ scripts keep the old path in their #! lines: only `bin/python` is ever run).
  local partial="$MOTO_DIR.partial"
  rm -rf "$partial"
  with_progress "moto (kit/aws/moto/requirements.txt): python3 -m venv" python3 -m venv "$partial"
  with_progress "moto: pip install" "$partial/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$MOTO_REQUIREMENTS"
  mv "$partial" "$MOTO_DIR"
}
