"""Make a Ray wheel small enough for one device call (64 MiB with the working tree): drop the parts the
workbench's Ray backend never imports (Java jars, RLlib, Serve, Data, Train, Tune, LLM) and their RECORD
lines. Ray 2.60.0 for CPython 3.12: 79.3 MB -> 41.8 MB; imports, `ray.init` and actors checked unchanged.

    python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d /tmp/raywhl ray==2.60.0
    python benchmarks/slim_ray_wheel.py /tmp/raywhl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl .whl/
    # plus jsonschema, jsonschema-specifications, referencing, rpds-py (absent from the GPU image)

The GPU command then installs `.whl/*.whl` with `pip install --no-index --no-deps --target /tmp/site`
(see `benchmarks/gpu_search_ray.sh`); pip keeps the executables' mode bits (gcs_server, raylet).
"""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = ("ray/jars/", "ray/rllib/", "ray/llm/", "ray/serve/", "ray/data/", "ray/train/", "ray/tune/")


def slim(src: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / src.name
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            if info.filename.startswith(DROP):
                continue
            data = zi.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"\n".join(ln for ln in data.split(b"\n") if not ln.decode().startswith(DROP))
            zo.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return dst


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    out = slim(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB (from {Path(sys.argv[1]).stat().st_size / 1e6:.1f} MB)")
