"""A copy of the package imported under another name (an older tree beside this one, as
scripts/harness.old_tree loads it for ``ab.py --old`` and ``first_call.py --old``) runs
its own CPU kernels, not this tree's."""

import importlib.util
import pathlib
import sys

import dmlnumba


def test_a_copy_of_the_package_imports_its_own_kernels():
    pkg = pathlib.Path(dmlnumba.__file__).parent
    name = "dmlnumba_tree_copy"
    spec = importlib.util.spec_from_file_location(
        name, pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        process = importlib.import_module(name + ".cpu.process")
        assert process.kernels().__name__ == name + ".cpu.kernels"
    finally:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[m]
