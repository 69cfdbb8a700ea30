"""The C++ helper `_braid_torch` (bindings/python/torch_extension.cc): reads what PyTorch 1.13
keeps out of Python's reach, the factor of a PREMUL_SUM ReduceOp.

Meson builds it where libtorch's headers are found, into the build folder beside libbraid; it is
looked for next to $BRAID_LIBRARY (and in that folder's bindings/python), then beside this
package.
"""

import glob
import importlib.machinery
import importlib.util
import os

from .. import _library as L

_NAME = "_braid_torch"
_module = None


def _candidates():
    folders = []
    lib = L.library().path
    if lib and os.path.sep in lib:
        top = os.path.dirname(os.path.abspath(lib))
        folders += [top, os.path.join(top, "bindings", "python")]
    here = os.path.dirname(os.path.abspath(__file__))
    folders += [here, os.path.dirname(here)]
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    found = []
    for folder in folders:
        for suffix in suffixes:
            found += glob.glob(os.path.join(folder, _NAME + suffix))
    return found


def _load():
    global _module
    if _module is None:
        tried = _candidates()
        for path in tried:
            spec = importlib.util.spec_from_file_location(_NAME, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _module = module
            break
        else:
            raise RuntimeError(
                "braid backend: PREMUL_SUM on this PyTorch needs the _braid_torch extension, "
                "built by Meson where libtorch's headers are found (Debian: libtorch-dev), next "
                "to libbraid; none was found beside " + (L.library().path or "libbraid"))
    return _module


def premul_factor(reduce_op):
    """The factor (a float) of a PREMUL_SUM ReduceOp."""
    return _load().premul_factor(reduce_op)
