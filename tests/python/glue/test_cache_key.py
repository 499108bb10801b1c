"""paths.sources_digest, which goes into Inductor's cache key beside the kernel headers'
hash (integration.py, CacheKeyPass): a change to a lowering must change it, so that a
graph compiled by the older code is not served from Inductor's cache; the demo's files
do not shape generated code and must not."""
import shutil
from pathlib import Path

from rvv_inductor import paths

PKG = Path(paths.__file__).resolve().parent


def test_sources_digest_follows_the_lowerings_not_the_demo(tmp_path):
    root = tmp_path / "rvv_inductor"
    shutil.copytree(PKG, root, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = paths.sources_digest(root)
    assert before == paths.sources_digest() and len(before) == 16  # the copy hashes as the package
    paths.sources_digest.cache_clear()

    demo_file = next((root / "demo").glob("*.py"))
    demo_file.write_text(demo_file.read_text() + "\n# a demo edit\n")
    assert paths.sources_digest(root) == before
    paths.sources_digest.cache_clear()

    lowering = root / "inductor" / "attention_lowering.py"
    lowering.write_text(lowering.read_text().replace("a.T = ", "a.T =  "))
    assert paths.sources_digest(root) != before
