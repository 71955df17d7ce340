"""InferenceSession: onnxruntime's Python API over edgerun's pipeline.

    bytes -> onnx.reader -> ir.Model -> inline functions -> expand contrib ops -> optimizer
    -> partition -> plan -> run
"""
from __future__ import annotations

import copy
import os
import time
from typing import Optional

from .. import ir
from ..ir.validate import validate_model
from ..errors import InvalidArgument, NotImplementedOp
from ..onnx import load_model
from ..optimizer import DISABLE_ALL, optimize
from ..shape_inference.type_check import inferred_and_checked, own_nodes
from ..optimizer.contrib_ops import expand_contrib_ops
from ..ir.inline_functions import inline_functions
from ..optimizer.save import save_optimized
from ..providers.graph_capture import is_capture_node
from ..providers.registry import constant_evaluator, create_providers
from ..runtime import cancel, limits
from ..runtime.executor import GraphExecutor
from ..runtime.partition import Partitioner
from .feeds import FeedChecker
from .io_binding import IOBinding
from .metadata import ModelMetadata, NodeArg
from .ort_value import OrtValue
from .options import SessionOptions
from .profiling import Profiler

MAX_OPSET = {"": 28, "ai.onnx.ml": 5, "ai.onnx.preview.training": 1, "ai.onnx.preview": 1}


class InferenceSession:
    def __init__(self, path_or_bytes, sess_options: Optional[SessionOptions] = None, providers=None,
                 provider_options=None, **kwargs):
        self._source = path_or_bytes          # set_providers builds the session again from it
        self._fallback = True
        self._build(path_or_bytes, sess_options or SessionOptions(), providers, provider_options)

    def _build(self, path_or_bytes, options: SessionOptions, providers, provider_options):
        self._options = options
        # runs check tensor sizes only under a limit of the user's (a thread-local each run)
        self._limited = options.max_tensor_bytes != limits.DEFAULT_MAX_TENSOR_BYTES
        started = time.perf_counter()
        if isinstance(path_or_bytes, ir.Model):
            self._model = copy.deepcopy(path_or_bytes)     # passes edit the model in place
        else:
            self._model = load_model(path_or_bytes, max_bytes=options.max_model_bytes,
                                     max_external_bytes=options.max_external_data_bytes)
        self._model_path = (os.fspath(path_or_bytes)
                            if isinstance(path_or_bytes, (str, os.PathLike)) else None)
        _check_opsets(self._model)
        validate_model(self._model)
        inline_functions(self._model)
        own = own_nodes(self._model.graph)      # the model's nodes before contrib expansion
        expand_contrib_ops(self._model)
        self._providers = create_providers(providers, provider_options,
                                           skip_unavailable=self._fallback)
        for provider in self._providers:
            provider.configure(self._options)
        level = int(self._options.graph_optimization_level)
        if level <= DISABLE_ALL:                  # else the optimizer's infer_types checks
            inferred_and_checked(self._model, own)
        optimize(self._model, level, evaluate=constant_evaluator(), providers=self._providers,
                 checked_nodes=own)
        if self._options.optimized_model_filepath:
            save_optimized(self._model, self._options.optimized_model_filepath)
        for i, provider in enumerate(self._providers):
            provider.prepare_model(self._model, ahead=tuple(self._providers[:i]))
        self._partitioner = Partitioner(self._providers)
        graph = self._model.graph
        self._executor = GraphExecutor(graph, self._model.opset_imports, self._partitioner)
        initializer_names = set(graph.initializers)
        self._inputs = [v for v in graph.inputs if v.name not in initializer_names]
        self._overridable = [v for v in graph.inputs if v.name in initializer_names]
        self._check_feeds = FeedChecker(self._inputs, self._overridable)
        self.load_seconds = time.perf_counter() - started
        self._profiler = None
        if self._options.enable_profiling:
            self._profiler = Profiler(self._options.profile_file_prefix)
            self._profiler.record_session("session_initialization", started, self.load_seconds)

    # ---- onnxruntime's API -----------------------------------------------------------------

    def get_inputs(self) -> list:
        return [NodeArg.from_value_info(v) for v in self._inputs]

    def get_outputs(self) -> list:
        return [NodeArg.from_value_info(v) for v in self._model.graph.outputs]

    def get_overridable_initializers(self) -> list:
        return [NodeArg.from_value_info(v) for v in self._overridable]

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata.from_model(self._model)

    def get_providers(self) -> list:
        return [p.ort_name for p in self._providers]

    def get_provider_options(self) -> dict:
        return {p.ort_name: dict(p.options) for p in self._providers}

    def get_session_options(self) -> SessionOptions:
        return self._options

    def set_providers(self, providers=None, provider_options=None) -> None:
        """Build the session again on `providers` (onnxruntime re-creates it too); the
        session options stay. None: the CPU provider."""
        self._build(self._source, self._options, providers, provider_options)

    def disable_fallback(self) -> None:
        """From now on, set_providers raises for a provider that cannot run here instead of
        skipping it (with a warning) and falling back to the next, finally the CPU."""
        self._fallback = False

    def enable_fallback(self) -> None:
        self._fallback = True

    def run_with_ort_values(self, output_names, input_dict_ort_values: dict,
                            run_options=None) -> list:
        """run() over OrtValues (on the CPU or the GPU): the outputs as OrtValues, on the
        CPU."""
        binding = self.io_binding()
        for name, value in input_dict_ort_values.items():
            if not isinstance(value, OrtValue):
                raise InvalidArgument(f"input '{name}': run_with_ort_values takes OrtValues, "
                                      f"got {type(value).__name__}")
            binding.bind_ortvalue_input(name, value)
        for name in output_names or self._executor.output_names:
            binding.bind_output(name)
        self.run_with_iobinding(binding, run_options)
        return binding.get_outputs()

    def run_async(self, output_names, input_feed: dict, callback, user_data=None,
                  run_options=None) -> None:
        """run() in another thread; then `callback(outputs, user_data, error_message)` with
        the outputs and "" or, on failure, None and the error's message, as onnxruntime."""
        import threading

        def work():
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as e:   # noqa: BLE001 - handed to the callback
                callback(None, user_data, f"{type(e).__name__}: {e}")
                return
            callback(outputs, user_data, "")

        threading.Thread(target=work, name="edgerun-run-async", daemon=True).start()

    def end_profiling(self) -> str:
        """Write the profile (Chrome trace JSON) and return its path; "" when not profiling."""
        if not self._profiler:
            return ""
        path = self._profiler.write()
        self._profiler = Profiler(self._options.profile_file_prefix)
        return path

    def explain(self, io_binding=None) -> dict:
        """Where each node runs and why earlier providers refused it (and `falls_back_to`:
        the provider that runs it when its kernel refuses the inputs at run time, through
        host copies that provider's stats count; runtime/refusals.py), the number of
        device<->host copies per run of the main graph, and those planned inside control-flow
        bodies (counted once per body, whatever the number of iterations). With an
        `io_binding`, the copies are those of a run with that binding (outputs bound to a
        device are not read back, device inputs are not uploaded). `graph_capture` names the
        provider that runs the whole graph as one recorded program (providers/
        graph_capture.py), or is None; `nodes` are the model's nodes either way."""
        placements = self._partitioner.placements
        captured = [p.provider.name for p in placements if is_capture_node(p.node)]
        nodes = [{"node": p.node.name, "op_type": p.node.op_type,
                  "domain": p.node.domain or "ai.onnx", "provider": p.provider.name,
                  "refused_by": list(p.refusals),
                  "falls_back_to": p.fallback.name if p.fallback is not None else None}
                 for p in placements if not is_capture_node(p.node)]
        plan = (self._executor.plan if io_binding is None
                else self._executor.plan_for(*io_binding._devices()))
        return {"nodes": nodes, "copies_per_run": plan.copies,
                "copies": [s.node.name for s in plan.steps if s.provider == "copy"] +
                list(plan.inner_copies),
                "copies_per_subgraph_run": self._executor.subgraph_copy_steps(),
                "graph_capture": captured[0] if captured else None,
                "providers": self.get_providers()}

    def plan_source(self) -> str:
        """The Python source the main graph's plan runs as (edgerun's own: the CPU fast path
        compiles the plan into one function, runtime/straight_line.py); tracebacks from a run
        show its lines. Empty where the plan runs step by step (past MAX_STEPS)."""
        runner = self._executor.plan.runner
        return getattr(runner, "source", "") if runner is not None else ""

    def run(self, output_names, input_feed: dict, run_options=None) -> list:
        """Outputs for `input_feed`; with `run_options`, setting its `terminate` (from any
        thread) stops the run with RunTerminated before the next node or loop iteration."""
        feeds = self._check_feeds(input_feed)
        outputs = self._execute(feeds, run_options=run_options)
        all_names = self._executor.output_names
        if not output_names:
            return outputs
        index = {name: i for i, name in enumerate(all_names)}
        picked = []
        for name in output_names:
            if name not in index:
                raise InvalidArgument(f"unknown output '{name}'; the model's outputs are "
                                      f"{', '.join(repr(n) for n in all_names)}")
            picked.append(outputs[index[name]])
        return picked

    def io_binding(self) -> IOBinding:
        """An IOBinding for run_with_iobinding: inputs and outputs on chosen devices."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options=None) -> None:
        """Run with the binding's inputs; its outputs are then `iobinding.get_outputs()`."""
        if not isinstance(iobinding, IOBinding) or iobinding._session is not self:
            raise InvalidArgument("run_with_iobinding needs an IOBinding made by this "
                                  "session's io_binding()")
        iobinding._run(run_options)

    def _execute(self, feeds: dict, plan=None, run_options=None) -> list:
        """One run of the main graph over checked feeds (bracketed by the providers'
        begin_run / end_run, profiled when asked)."""
        for provider in self._providers:
            provider.begin_run()
        profile: Optional[list] = None
        if self._profiler:
            profile, started = [], time.perf_counter()
        try:
            if run_options is None and not self._limited:
                outputs = self._executor.run(feeds, profile=profile, plan=plan)
            else:     # a watched or limited run (both set thread-locals the kernels read)
                with limits.limited(self._options.max_tensor_bytes), \
                        cancel.watching(run_options):
                    outputs = self._executor.run(feeds, profile=profile, plan=plan)
        finally:
            for provider in self._providers:
                provider.end_run()
        if self._profiler and profile is not None:
            self._profiler.record_run(profile, started, time.perf_counter() - started)
        return outputs


def _check_opsets(model: ir.Model) -> None:
    for domain, version in model.opset_imports.items():
        newest = MAX_OPSET.get("" if domain == "ai.onnx" else domain)
        if newest is not None and version > newest:
            raise NotImplementedOp(f"the model imports opset {version} of domain "
                                   f"'{domain or 'ai.onnx'}'; edgerun supports up to {newest}")

