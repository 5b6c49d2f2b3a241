"""Store the Themis artifact's five real workloads as fabriclab built-ins (JSON, with where
their numbers came from), read by fabriclab's own ASTRA-sim 1.0 reader:

    .venv/bin/python scripts/import_themis_workloads.py \
        ARTIFACT/themis/inputs/workload/realworld_workloads

ARTIFACT is jared-ni/astrasim-archgym-public at 786291289945ae0d0a0b0b77de622b7894b462d9.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from workloads.training.astra_text import parse_workload
from workloads.training.library import DATA_DIR, to_json

REPO = "jared-ni/astrasim-archgym-public"
COMMIT = "786291289945ae0d0a0b0b77de622b7894b462d9"
FILES = {"Resnet50_DataParallel_fused": "themis-resnet50",
         "gnmt_fp16_fused": "themis-gnmt",
         "medium_DLRM_fused": "themis-dlrm-medium",
         "large_DLRM_fused": "themis-dlrm-large",
         "transformer_1t_fused_only_t": "themis-transformer-1t"}


def main(folder: str) -> None:
    for stem, name in FILES.items():
        path = Path(folder) / f"{stem}.txt"
        raw = path.read_bytes()
        workload = parse_workload(raw.decode(), f"{stem}.txt")
        provenance = {
            "repository": REPO, "commit": COMMIT,
            "path": f"themis/inputs/workload/realworld_workloads/{stem}.txt",
            "sha256": hashlib.sha256(raw).hexdigest(),
            "command": "scripts/import_themis_workloads.py (fabriclab's ASTRA-sim 1.0 reader)"}
        (DATA_DIR / f"{name}.json").write_text(to_json(workload, provenance))
        print(f"{name}: {len(workload.layers)} layers ({workload.kind})")


if __name__ == "__main__":
    main(sys.argv[1])
