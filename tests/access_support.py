"""The cases of confined file access's rule, shared by its Python reference (tests/unit/test_access.py)
and the shim's mirror of it (tests/spark/test_access_rule.py): both must decide every case alike."""

from __future__ import annotations

import os
from pathlib import Path


def rule_cases(base: Path) -> list[tuple[str, list[str], bool]]:
    """(path, roots, allowed) over a tree made under `base`: a root with a symlink out of it and one
    within it, a directory beside the root whose name starts like the root's, and a symlinked root."""
    root, outside = base / "data", base / "outside"
    (root / "warehouse" / "t").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (base / "data-other").mkdir()
    os.symlink(outside, root / "warehouse" / "escape")  # inside the root, pointing out of it
    os.symlink(root / "warehouse" / "t", root / "inner")  # inside, pointing inside
    os.symlink("../outside", root / "relative-escape")  # a relative target
    os.symlink(root, base / "data-link")  # a root named through a symlink
    roots = [str(root)]
    r = str(root)
    return [
        (r, roots, True),
        (f"{r}/", roots, True),
        (f"{r}/warehouse/t/part-0.parquet", roots, True),
        (f"{r}/warehouse/new/dir/not/there/yet", roots, True),
        (f"file:{r}/warehouse/t", roots, True),
        (f"file://{r}/warehouse/t", roots, True),
        (f"{r}/inner/x.parquet", roots, True),
        (f"{r}/warehouse/../warehouse/t", roots, True),
        (f"{r}/missing/../warehouse", roots, True),
        (str(outside / "secret.txt"), roots, False),
        (f"{r}/../outside/secret.txt", roots, False),
        (f"{r}/warehouse/t/../../../outside", roots, False),
        (f"{r}/warehouse/escape/secret.txt", roots, False),
        (f"{r}/warehouse/escape", roots, False),
        (f"{r}/warehouse/escape/../outside", roots, False),  # `..` after a link: the target's parent, as the OS does
        (f"{r}/warehouse/escape/../data/warehouse", roots, True),
        (f"{r}/relative-escape/secret.txt", roots, False),
        (f"file:{r}/warehouse/escape/secret.txt", roots, False),
        (f"{base}/data-other/x", roots, False),  # a sibling whose name starts like the root's
        (str(base / "data-link" / "warehouse" / "t"), roots, True),  # the same directory by another name
        (f"{r}/warehouse/t", [str(base / "data-link")], True),
        (str(outside), [str(base / "data-link")], False),
        ("/", roots, False),
        ("/etc/passwd", roots, False),
        ("s3a://bucket/lake/t", ["s3a://bucket/lake"], True),
        ("s3a://bucket/lake/../other/t", ["s3a://bucket/lake"], False),
        ("s3a://bucket/lakehouse/t", ["s3a://bucket/lake"], False),
        ("s3a://other/lake/t", ["s3a://bucket/lake"], False),
        ("S3A://bucket/lake/t", ["s3a://bucket/lake/"], True),
        ("http://example.org/udf.jar", roots, False),
        (f"{r}/warehouse/t", [str(outside), str(root)], True),
        (f"{r}/warehouse/t", [], False),
        (f"{r}/warehouse/t", ["/"], True),
    ]
