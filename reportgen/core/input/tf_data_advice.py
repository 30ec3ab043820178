"""What a tf.data bottleneck means and what to do about it.

Three layers: XProf's own classification of the bottleneck iterator and its
suggestion (tf_data_bottleneck.md §4), a plain explanation of every
component of the iterator's long name (`Iterator::Root::Prefetch::Map` is
the Map stage, called by Prefetch, called by the root), and concrete advice
that also uses what the trace recorded about the pipeline (e.g. a map that
ran with parallelism 1, a pipeline without prefetch).
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.core.input.tf_data import IteratorInfo

GUIDE = "https://www.tensorflow.org/guide/data_performance_analysis"
GUIDE_SOURCES = GUIDE + "#source_datasets"
GUIDE_TRANSFORMATIONS = GUIDE + "#transformation_datasets"
GUIDE_CPU = GUIDE + "#3_are_you_reaching_high_cpu_utilization"
PERF_EXTRACTION = "https://www.tensorflow.org/guide/data_performance#parallelizing_data_extraction"
PERF_TRANSFORMATION = "https://www.tensorflow.org/guide/data_performance#parallelizing_data_transformation"
PERF_CACHING = "https://www.tensorflow.org/guide/data_performance#caching"
PERF_PREFETCH = "https://www.tensorflow.org/guide/data_performance#prefetching"
DATA_SERVICE = "https://www.tensorflow.org/api_docs/python/tf/data/experimental/service"

SLOW_SOURCE = "slow source"
SLOW_DATA_SERVICE = "slow tf.data service"
SLOW_REMOTE_SOURCE = "slow remote source"
PARALLEL_TRANSFORMATION = "transformation with a parallel version"
SEQUENTIAL_TRANSFORMATION = "transformation without a parallel version"
OTHER = "other"

_TYPES = {
    **dict.fromkeys(
        ("TFRecord", "SSTable", "RecordIO", "Spanner", "TFColumn", "SleepwalkRemoteDataset", "TextLine",
         "StitchedTimelineDataset", "DateKeyDataset", "CapacitorProto", "LMDB", "ExternalDataset", "PearModel",
         "FixedLengthRecordV2", "FromTensor", "TensorSlice", "Generator", "SyntheticDatasetOp"),
        SLOW_SOURCE,
    ),
    "DataService": SLOW_DATA_SERVICE,
    **dict.fromkeys(
        ("GuzzlerDataGuzzlerRemoteDataset", "ReverbDataset", "DatasetSampleGame", "Courier", "ReverbEpisodeDataset"),
        SLOW_REMOTE_SOURCE,
    ),
    "Map": PARALLEL_TRANSFORMATION,
    "Interleave": PARALLEL_TRANSFORMATION,
    "Filter": SEQUENTIAL_TRANSFORMATION,
    "Batch": SEQUENTIAL_TRANSFORMATION,
    "Unbatch": SEQUENTIAL_TRANSFORMATION,
}


@dataclass(frozen=True)
class Advice:
    """One suggestion: text, optionally a code snippet and a link."""

    text: str
    code: str = ""
    link: str = ""
    link_label: str = ""


def bottleneck_type(iterator_name: str) -> str:
    """XProf's BottleneckType of an iterator (by its short name, exact match)."""
    return _TYPES.get(iterator_name, OTHER)


_CACHE_ADVICE = Advice(
    "Consider adding cache after this transformation if the data fits in memory and nothing upstream is random "
    "(e.g. shuffle).",
    "dataset = dataset.cache()",
    PERF_CACHING,
    "caching",
)

XPROF_SUGGESTIONS: dict[str, list[Advice]] = {
    SLOW_SOURCE: [
        Advice("Check the locality of the host and the input data: ideally they are in the same cell or region."),
        Advice("Parallelize reading from this dataset source.", "", PERF_EXTRACTION, "parallelizing data extraction"),
    ],
    SLOW_DATA_SERVICE: [
        Advice("Fetching data from the tf.data service took a while: profile the tf.data service worker."),
        Advice("More on the tf.data service.", "", DATA_SERVICE, "tf.data service"),
    ],
    SLOW_REMOTE_SOURCE: [
        Advice("The remote data source is slow: profile its host to analyze the issue further."),
    ],
    PARALLEL_TRANSFORMATION: [
        Advice("Parallelize this transformation.", "num_parallel_calls=tf.data.AUTOTUNE", PERF_TRANSFORMATION,
               "parallelizing data transformation"),
        _CACHE_ADVICE,
    ],
    SEQUENTIAL_TRANSFORMATION: [
        Advice("This transformation is inherently sequential: add outer parallelism by running several copies of "
               "the input pipeline over sharded inputs and combining the results.", "", GUIDE_TRANSFORMATIONS,
               "transformation datasets"),
        _CACHE_ADVICE,
    ],
    OTHER: [Advice("See the tf.data performance analysis guide.", "", GUIDE, "tf.data performance analysis")],
}

# Iterator short name → (the Python API that creates it, what it does).
DATASET_OPS: dict[str, tuple[str, str]] = {
    "Root": ("iter(dataset), model.fit(dataset)", "the iterator the training loop calls: one call is one GetNext"),
    "Prefetch": ("dataset.prefetch(n)", "prepares elements ahead of time on a background thread, into a buffer"),
    "Map": ("dataset.map(f)", "applies f to each element, one element at a time"),
    "ParallelMap": ("dataset.map(f, num_parallel_calls=n)", "applies f to several elements at once"),
    "ParallelMapV2": ("dataset.map(f, num_parallel_calls=n)", "applies f to several elements at once"),
    "MapAndBatch": ("dataset.map(f).batch(n)", "map followed by batch, fused by the tf.data optimizer: applies f "
                    "and assembles batches on a background thread (parallel only if the map was)"),
    "Batch": ("dataset.batch(n)", "stacks consecutive elements into batches"),
    "BatchV2": ("dataset.batch(n)", "stacks consecutive elements into batches"),
    "ParallelBatch": ("dataset.batch(n, num_parallel_calls=k)", "builds batches in parallel"),
    "PaddedBatch": ("dataset.padded_batch(n)", "pads and stacks consecutive elements into batches"),
    "PaddedBatchV2": ("dataset.padded_batch(n)", "pads and stacks consecutive elements into batches"),
    "Unbatch": ("dataset.unbatch()", "splits batches back into elements"),
    "Shuffle": ("dataset.shuffle(buffer_size)", "samples elements from a buffer it fills first"),
    "ShuffleAndRepeat": ("dataset.shuffle(b).repeat()", "shuffle followed by repeat, fused by the optimizer"),
    "Repeat": ("dataset.repeat(n)", "restarts its input n times"),
    "ForeverRepeat": ("dataset.repeat()", "restarts its input forever"),
    "Interleave": ("dataset.interleave(f)", "reads from several inner datasets in turn, one at a time"),
    "ParallelInterleave": ("dataset.interleave(f, num_parallel_calls=n)", "reads several inner datasets at once"),
    "ParallelInterleaveV2": ("dataset.interleave(f, num_parallel_calls=n)", "reads several inner datasets at once"),
    "ParallelInterleaveV3": ("dataset.interleave(f, num_parallel_calls=n)", "reads several inner datasets at once"),
    "ParallelInterleaveV4": ("dataset.interleave(f, num_parallel_calls=n)", "reads several inner datasets at once"),
    "LegacyParallelInterleave": ("tf.data.experimental.parallel_interleave", "reads several inner datasets at once"),
    "FlatMap": ("dataset.flat_map(f)", "maps each element to a dataset and flattens them, sequentially"),
    "Filter": ("dataset.filter(pred)", "drops the elements pred rejects, one element at a time"),
    "ParallelFilter": ("dataset.filter(pred) (parallelised)", "drops the elements pred rejects, in parallel"),
    "MemoryCache": ("dataset.cache()", "in-memory cache: fills on the first pass, serves from memory afterwards"),
    "MemoryCacheImpl": ("dataset.cache()", "the in-memory cache's reader/writer"),
    "MemoryReader": ("dataset.cache()", "reads elements from the in-memory cache"),
    "MemoryWriter": ("dataset.cache()", "fills the in-memory cache on the first pass"),
    "FileCache": ("dataset.cache(filename)", "on-disk cache"),
    "FileReader": ("dataset.cache(filename)", "reads elements from the on-disk cache"),
    "FileWriter": ("dataset.cache(filename)", "fills the on-disk cache on the first pass"),
    "TensorSlice": ("tf.data.Dataset.from_tensor_slices(x)", "source: slices of in-memory tensors"),
    "FromTensor": ("tf.data.Dataset.from_tensors(x)", "source: one in-memory element"),
    "Generator": ("tf.data.Dataset.from_generator(g)", "source: a Python generator (runs under the GIL)"),
    "Range": ("tf.data.Dataset.range(n)", "source: a range of integers"),
    "TFRecord": ("tf.data.TFRecordDataset(files)", "source: records read from TFRecord files"),
    "TextLine": ("tf.data.TextLineDataset(files)", "source: lines read from text files"),
    "FixedLengthRecord": ("tf.data.FixedLengthRecordDataset(files)", "source: fixed-size records read from files"),
    "FixedLengthRecordV2": ("tf.data.FixedLengthRecordDataset(files)", "source: fixed-size records read from files"),
    "Zip": ("tf.data.Dataset.zip(...)", "combines elements of several datasets"),
    "Concatenate": ("dataset.concatenate(other)", "one dataset after the other"),
    "Take": ("dataset.take(n)", "stops after n elements"),
    "Skip": ("dataset.skip(n)", "drops the first n elements"),
    "Window": ("dataset.window(n)", "groups elements into windows"),
    "Scan": ("dataset.scan(...)", "a stateful map"),
    "Snapshot": ("dataset.snapshot(path)", "persists the pipeline's output to disk"),
    "DataService": ("dataset.apply(tf.data.experimental.service.distribute(...))", "elements from tf.data service"),
    "Rebatch": ("distribution strategy rebatching", "splits global batches into per-replica batches"),
    "MaxIntraOpParallelism": ("options.threading.max_intra_op_parallelism", "threading option (pass-through)"),
    "PrivateThreadPool": ("options.threading.private_threadpool_size", "threading option (pass-through)"),
    "Model": ("autotuning", "the autotuning model's wrapper (pass-through)"),
    "AssertCardinality": ("dataset.apply(assert_cardinality(n))", "checks the number of elements (pass-through)"),
    "ParseExample": ("parse_example_dataset / fused parsing", "parses tf.train.Example protos in parallel"),
}


def explain_long_name(long_name: str, iterators_by_long_name: dict[str, IteratorInfo]) -> list[dict]:
    """One row per component of `Iterator::A::B::C`, outermost first: the
    stage, the API that creates it, what it does and the dataset op(s) the
    trace names for it (the `name` stat, e.g. fused(MapDataset:3,BatchDatasetV2:4))."""
    parts = long_name.split("::")
    rows = []
    for depth in range(1, len(parts)):
        prefix = "::".join(parts[: depth + 1])
        component = parts[depth]
        api, what = DATASET_OPS.get(component, ("", "a dataset stage without a description here"))
        info = iterators_by_long_name.get(prefix)
        rows.append({"component": component, "long_name": prefix, "api": api, "what": what,
                     "dataset": info.dataset if info else ""})
    return rows


def _int_param(info: IteratorInfo, key: str) -> int | None:
    try:
        return int(info.params[key])
    except (KeyError, ValueError):
        return None


_RANDOM = ("Shuffle",)
_INFINITE = ("Repeat", "ForeverRepeat", "ShuffleAndRepeat")
_BATCHES = ("Batch", "BatchV2", "PaddedBatch", "PaddedBatchV2")


def cache_advice(bottleneck: IteratorInfo, pipeline: list[IteratorInfo]) -> Advice:
    """Where `cache()` goes for this bottleneck, from the stages upstream of it that the trace names: after it when
    everything upstream is deterministic and finite; else on the deterministic part, before the shuffle / repeat."""
    upstream = [i for i in pipeline if i.long_name.startswith(bottleneck.long_name + "::")]
    random = [i.name for i in upstream if any(r in i.name for r in _RANDOM)]
    infinite = [i.name for i in upstream if i.name in _INFINITE]
    if not random and not infinite:
        return Advice(f"If the data fits in memory, cache right after {bottleneck.name}: nothing upstream of it is "
                      "random or infinite in this pipeline, so every later epoch reads from memory.",
                      "dataset = dataset.cache()", PERF_CACHING, "caching")
    what = " and ".join(sorted(set(random + infinite)))
    return Advice(f"Upstream of {bottleneck.name} is {what}: the elements it sees are shuffled and never repeat "
                  "exactly, so a cache after it would hold nothing reusable. Cache the deterministic part instead: "
                  "move the map before the shuffle and repeat and cache right after it (source → map → cache → "
                  "shuffle → repeat → batch → prefetch); keep any random augmentation after the cache.",
                  "dataset = source.map(f, num_parallel_calls=tf.data.AUTOTUNE).cache().shuffle(n).repeat()"
                  ".batch(b).prefetch(tf.data.AUTOTUNE)", PERF_CACHING, "caching")


def concrete_advice(bottleneck: IteratorInfo, pipeline: list[IteratorInfo]) -> list[Advice]:
    """Specific suggestions for the bottleneck iterator, using what the trace recorded."""
    name = bottleneck.name
    parallelism = _int_param(bottleneck, "parallelism")
    autotune = bottleneck.params.get("autotune")
    advice: list[Advice] = []
    if name in ("Map", "MapAndBatch") or (name.startswith("ParallelMap") and (parallelism or 0) <= 1):
        ran = f" (the trace recorded parallelism={parallelism})" if parallelism is not None else ""
        advice.append(Advice(f"Run the map function in parallel{ran}: pass num_parallel_calls to map.",
                             "dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)", PERF_TRANSFORMATION,
                             "parallelizing data transformation"))
        advice.append(cache_advice(bottleneck, pipeline))
    elif name.startswith("ParallelMap") or name == "ParseExample":
        note = " (autotune is off)" if autotune == "false" else ""
        upstream = [i for i in pipeline if i.long_name.startswith(bottleneck.long_name + "::")]
        if any(i.name in _BATCHES for i in upstream):  # the map already runs over batches
            advice.append(Advice(f"The map already runs in parallel{note} and over whole batches (a batch is "
                                 "upstream of it); the function itself is slow: move its work offline, or cache "
                                 "its output.", "", PERF_TRANSFORMATION, "vectorizing mapping"))
        else:
            advice.append(Advice(f"The map already runs in parallel{note}; the function itself is slow: vectorise "
                                 "it (batch before map and map over batches), move work offline, or cache its "
                                 "output.", "dataset.batch(n).map(f_on_batches, num_parallel_calls=tf.data.AUTOTUNE)",
                                 PERF_TRANSFORMATION, "vectorizing mapping"))
        advice.append(cache_advice(bottleneck, pipeline))
    elif name in ("Interleave", "FlatMap"):
        advice.append(Advice("Read the inner datasets in parallel.",
                             "dataset.interleave(f, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
                             PERF_EXTRACTION, "parallelizing data extraction"))
    elif "Interleave" in name:
        advice.append(Advice("The inner datasets are slow to read even in parallel: raise cycle_length / "
                             "num_parallel_calls, check where the files live, or shard the files more finely.",
                             "", PERF_EXTRACTION, "parallelizing data extraction"))
    elif name in ("TFRecord", "TextLine", "FixedLengthRecord", "FixedLengthRecordV2", "SSTable", "RecordIO",
                  "ArrayRecord"):
        advice.append(Advice("Reading files is the bottleneck: read several files at once with interleave, and keep "
                             "the data close to the host.",
                             "tf.data.Dataset.from_tensor_slices(files).interleave(tf.data.TFRecordDataset, "
                             "num_parallel_calls=tf.data.AUTOTUNE)", PERF_EXTRACTION, "parallelizing data extraction"))
    elif name == "Generator":
        advice.append(Advice("A Python generator feeds the pipeline and runs under the GIL: produce the data with "
                             "TensorFlow ops (from_tensor_slices, TFRecord files) or interleave several generators.",
                             "", GUIDE_SOURCES, "source datasets"))
    elif name in ("TensorSlice", "FromTensor", "Range"):
        advice.append(Advice("An in-memory source is the slowest stage: the per-element work is small but done one "
                             "element at a time; batch earlier and map over batches, or cache the result.",
                             "", GUIDE_SOURCES, "source datasets"))
    elif name in ("Batch", "BatchV2", "PaddedBatch", "PaddedBatchV2"):
        advice.append(Advice("Batching copies every element: build batches in parallel.",
                             "dataset.batch(n, num_parallel_calls=tf.data.AUTOTUNE)", PERF_TRANSFORMATION,
                             "parallelizing data transformation"))
    elif name in ("Filter", "Unbatch", "Scan", "Window"):
        advice.extend(XPROF_SUGGESTIONS[SEQUENTIAL_TRANSFORMATION])
    elif "Shuffle" in name:
        advice.append(Advice("Shuffle spends its time filling its buffer: use a smaller buffer_size, or shuffle file "
                             "names and interleave reads for a cheaper shuffle."))
    elif name == "Prefetch":
        advice.append(Advice("The consumer waited on an empty prefetch buffer: the stages before prefetch produce "
                             "elements more slowly than the training step takes them. Speed those stages up (see "
                             "their self time below) or let tf.data size the buffer.",
                             "dataset.prefetch(tf.data.AUTOTUNE)", PERF_PREFETCH, "prefetching"))
    elif "Cache" in name or name in ("MemoryReader", "MemoryWriter", "FileReader", "FileWriter"):
        advice.append(Advice("The first pass fills the cache; later passes read from it. If the cache stays slow, "
                             "make sure the same cached dataset is reused across epochs and that cache() comes "
                             "after the expensive transformations."))
    else:
        advice.extend(XPROF_SUGGESTIONS[bottleneck_type(name)])
    if not any(info.name == "Prefetch" for info in pipeline):
        advice.append(Advice("This pipeline has no prefetch: add one as the last transformation so that input "
                             "preparation overlaps the training step.", "dataset = dataset.prefetch(tf.data.AUTOTUNE)",
                             PERF_PREFETCH, "prefetching"))
    return advice
