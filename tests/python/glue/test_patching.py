"""_patching.PatchSet: every patch is undone, in reverse order, for attributes and dicts."""
from types import SimpleNamespace

from rvv_inductor._patching import PatchSet


def test_patch_and_restore_attributes_and_dicts():
    obj = SimpleNamespace(a=1)
    table = {"x": 1}
    p = PatchSet()
    assert not p.active
    p.set(obj, "a", 2)
    p.set(obj, "new", 3)        # did not exist: removed again
    p.set(table, "x", 10)
    p.set(table, "y", 20)       # did not exist: removed again
    p.set(obj, "a", 4)          # patched twice: the first original comes back
    assert p.active and obj.a == 4 and obj.new == 3 and table == {"x": 10, "y": 20}
    p.restore()
    assert not p.active
    assert obj == SimpleNamespace(a=1) and table == {"x": 1}
    p.restore()  # idempotent
    assert obj == SimpleNamespace(a=1)
