"""A model together with the names, shapes and dtypes of its inputs and outputs: what
`nngpu.Session`, `nngpu run` and `nngpu profile` work on, whatever the model came from.

`load_model` accepts a `.tflite` file, a corpus-format `.json` / `.json.gz` file (its first case,
with that case's inputs as the example), a HAL `Model` / `Model_1_3` (inputs named input0, ...),
or anything that already has `.model`, `.inputs` and `.outputs` (an ImportedModel, a
`nngpu.ModelBuilder` result). A `.tflite` model also carries its partition plan
(nngpu.tflite.partition): what runs on the driver and what on the host; given the device, the
plan also heeds the driver's getSupportedOperations."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .hal.types import Model, Model_1_3
from .modelutil import as_model_1_3
from .named_io import IOTensor, NamedIO, io_tensor

if TYPE_CHECKING:
    from .driver.device import Device
    from .tflite.partition import PartitionPlan


class ModelLoadError(ValueError):
    """The model cannot be read: a missing or malformed file, or a wrong schema."""


@dataclass
class NamedModel(NamedIO):
    model: Model | Model_1_3 | None                  # None: partitioned, see plan
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    description: str = ""
    example_inputs: list[np.ndarray] | None = None   # a corpus case's own inputs
    warnings: list[str] = field(default_factory=list)
    plan: PartitionPlan | None = None                # a .tflite model's partitions

    @property
    def operation_count(self) -> int:
        """NNAPI operations of the model, or of all its driver partitions."""
        if self.plan is not None:
            return sum(_operations(p.imported.model) for p in self.plan.parts if p.imported is not None)
        return _operations(self.model)


def _operations(model: Model | Model_1_3) -> int:
    return len(model.main.operations if isinstance(model, Model_1_3) else model.operations)


def describe(model: Model | Model_1_3, description: str = "") -> NamedModel:
    """A HAL model with its inputs named input0, input1, ... and outputs output0, ..."""
    main = as_model_1_3(model).main

    def io(prefix: str, indexes: list[int]) -> list[IOTensor]:
        return [io_tensor(f"{prefix}{k}", main.operands[i]) for k, i in enumerate(indexes)]

    return NamedModel(model, io("input", main.inputIndexes), io("output", main.outputIndexes), description)


def _from_json(path: Path) -> NamedModel:
    from .json_models import build_model, case_inputs, load_file

    try:
        cases = load_file(path)
        if not cases:
            raise ModelLoadError(f"{path}: the file has no cases")
        case = cases[0]
        named = describe(build_model(case, flat=True), case.name)
        named.example_inputs = case_inputs(case)
    except ModelLoadError:
        raise
    except OSError as e:
        raise ModelLoadError(f"cannot read {path}: {e.strerror or e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError) as e:
        raise ModelLoadError(f"{path}: not a JSON model file: {e}") from e
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        detail = f"missing field {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise ModelLoadError(f"{path}: not in the corpus model schema ({detail})") from e
    for example, t in zip(named.example_inputs, named.inputs):  # dynamic extents: the example decides
        if example is not None:
            t.shape = list(example.shape)
    return named


def _from_tflite(path: Path, fallback: bool, device: Device | None,
                 input_shapes: dict[str, list[int]] | None = None) -> NamedModel:
    from .tflite.errors import TFLiteFormatError
    from .tflite.partition import plan_tflite

    try:
        data = path.read_bytes()
    except OSError as e:
        raise TFLiteFormatError(f"cannot read {path}: {e.strerror or e}") from e
    # TFLiteImportError: the caller reports it
    plan = plan_tflite(data, fallback, device_support(device) if device is not None else None, input_shapes)
    warnings = [w for p in plan.parts if p.imported is not None for w in p.imported.warnings]
    skipped = sum(1 for i in plan.skipped if i < plan.file_ops)
    about = f"{path.name}: {plan.file_ops} TFLite operators, {skipped} folded into constants or unused"
    whole = plan.whole
    return NamedModel(whole.model if whole is not None else None, plan.inputs, plan.outputs, about, None,
                      warnings, plan)


def device_support(device: Device):
    """The driver's getSupportedOperations as the partitioner asks it: one flag per operation."""
    from .hal.types import ErrorStatus
    from .tflite.errors import TFLiteImportError

    def supported(model: Model | Model_1_3) -> list[bool]:
        status, flags = device.getSupportedOperations_1_3(as_model_1_3(model))
        if status != ErrorStatus.NONE:
            raise TFLiteImportError(f"getSupportedOperations refused an imported model: {ErrorStatus(status).name}")
        return list(flags)

    return supported


def load_model(source: Any, fallback: bool = True, device: Device | None = None,
               input_shapes: dict[str, list[int]] | None = None) -> NamedModel:
    """The NamedModel of a path or model object (see the module docstring). For a .tflite file:
    `fallback` False refuses operators the driver would not run (HostOperatorsRefused), `device`
    has its getSupportedOperations decide as well as the importer, and `input_shapes` gives
    inputs whose shape signature leaves extents open the shapes to import them at."""
    is_tflite = isinstance(source, (str, Path)) and Path(source).suffix == ".tflite"
    if input_shapes and not is_tflite:
        raise ModelLoadError("input_shapes applies to .tflite models only: other models declare their shapes")
    if isinstance(source, NamedModel):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ModelLoadError(f"{path}: no such file")
        if is_tflite:
            return _from_tflite(path, fallback, device, input_shapes)
        if path.suffix == ".json" or path.name.endswith(".json.gz"):
            return _from_json(path)
        raise ModelLoadError(f"{path.name}: unknown model format (expected .tflite, .json or .json.gz)")
    if isinstance(source, (Model, Model_1_3)):
        return describe(source)
    if all(hasattr(source, a) for a in ("model", "inputs", "outputs")):
        return NamedModel(source.model, list(source.inputs), list(source.outputs),
                          getattr(source, "description", ""), None, list(getattr(source, "warnings", [])))
    raise TypeError(f"cannot make a model of a {type(source).__name__}: give a path, a HAL Model or a "
                    f"ModelBuilder result")
