"""`--input` for `nngpu run` and `nngpu profile`: .npy files in model input order, NAME=FILE.npy,
or an .npz whose entries are named by tensor. Checked as strictly as a Session checks them:
the model's dtype (unless --cast) and shape."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CLIError

if TYPE_CHECKING:
    import numpy as np

    from ..named_model import NamedModel


def _load(path: str):
    import numpy as np

    if not Path(path).is_file():
        raise CLIError(f"--input {path}: no such file")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        reason = str(e).split(". ")[0] or type(e).__name__
        raise CLIError(f"--input {path}: not a .npy or .npz file ({reason})") from e


def read_inputs(specs: list[str], named: "NamedModel", cast: bool) -> list["np.ndarray | None"]:
    """The model's inputs from --input `specs`, checked; CLIError names what does not match."""
    from ..session import InputError, check_inputs

    names = [t.name for t in named.inputs]
    by_name: dict[str, object] = {}
    in_order: list[object] = []
    for spec in specs:
        name, sep, file = spec.partition("=")
        if sep and name in names:
            by_name[name] = _load(file)
            continue
        loaded = _load(spec)
        if hasattr(loaded, "files"):  # an .npz: every entry by tensor name
            with loaded:
                for key in loaded.files:
                    if key not in names:
                        raise CLIError(f"--input {spec}: entry {key!r} is not an input of the model "
                                       f"(inputs: {', '.join(names)})")
                    by_name[key] = loaded[key]
        else:
            in_order.append(loaded)
    if by_name and in_order:
        raise CLIError("--input: give the inputs either in model order (.npy files) or by name "
                       "(NAME=FILE.npy, .npz), not both")
    try:
        return check_inputs(named.inputs, by_name if by_name else in_order, cast, "--cast")
    except InputError as e:
        raise CLIError(f"--input: {e}") from e
