"""The catalogs of the libraries and tools that run on CUDA (bitsandbytes, flash-attn, xFormers, apex, Triton, nvcc,
torch.utils.cpp_extension and torch.compile, CuPy, Numba, ONNX Runtime, llama.cpp, the Hugging Face hub, transformers
and safetensors): a job whose output holds only their failure is diagnosed with the cause the failure names. The lines
are built from the emitters' own format strings (the catalogs cite them), as the programs print them."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics import messages

from .test_messages import _diagnose_files

CATALOG = messages.load()

JOBS = {
    # bitsandbytes 0.41's CUDA setup on a host whose CUDA has no prebuilt library, then its import error
    "bitsandbytes-setup": (
        "CUDA SETUP: Highest compute capability among GPUs detected: 8.6\n"
        "CUDA SETUP: Detected CUDA version 123\n"
        "CUDA SETUP: Required library version not found: libbitsandbytes_cuda123.so. Maybe you need to compile it "
        "from source?\n"
        "CUDA SETUP: Defaulting to libbitsandbytes_cpu.so...\n"
        "CUDA SETUP: CUDA detection failed! Possible reasons:\n"
        "1. CUDA driver not installed\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "    import bitsandbytes\n"
        "RuntimeError: CUDA Setup failed despite GPU being available. Please run the following command to get more "
        "information:\n",
        "driver", "catalog:bitsandbytes."),
    "triton-out-of-resource": (
        "Traceback (most recent call last):\n"
        '  File "bench.py", line 40, in <module>\n'
        "    matmul_kernel[grid](a, b, c, BLOCK_M=256, BLOCK_N=256, num_stages=5)\n"
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: "
        "232448. Reducing block sizes or `num_stages` may help.\n",
        # the traceback's generic rule names the same cause and keeps the incident (it yields only to another cause)
        "code_bug", "python-exception"),
    "llama-cpp-truncated-gguf": (
        "llama_model_loader: loaded meta data with 29 key-value pairs and 291 tensors from /models/m.Q4_K_M.gguf\n"
        "llama_model_load: error loading model: tensor 'blk.31.ffn_down.weight' data is not within the file bounds, "
        "model is corrupted or incomplete\n"
        "llama_load_model_from_file: failed to load model\n",
        "storage", "catalog:llama_cpp.model_file_truncated"),
    "hub-unreachable": (
        "Traceback (most recent call last):\n"
        '  File "serve.py", line 12, in <module>\n'
        "    tok = AutoTokenizer.from_pretrained(name)\n"
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached "
        "files and it looks like mistralai/Mistral-7B-v0.1 is not the path to a directory containing a file named "
        "config.json.\n",
        "network", "catalog:transformers.hub_unreachable"),
    "nvcc-host-compiler-too-new": (
        "/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU version! gcc versions later "
        "than 11 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version "
        "check; however, using an unsupported host compiler may cause compilation failure or incorrect run time "
        "execution. Use at your own risk.\n"
        "ninja: build stopped: subcommand failed.\n"
        "RuntimeError: Error compiling objects for extension\n",
        "driver", "catalog:nvcc.unsupported_gnu_version"),
    "onnxruntime-cuda-provider": (
        "[E:onnxruntime:Default, provider_bridge_ort.cc:1480 TryGetProviderInfo_CUDA] /onnxruntime_src/onnxruntime/"
        "core/session/provider_bridge_ort.cc:1193 onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() "
        "[ONNXRuntimeError] : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
        "libcudnn.so.8: cannot open shared object file: No such file or directory\n"
        "[W:onnxruntime:Default, onnxruntime_pybind_state.cc:747 CreateExecutionProviderInstance] Failed to create "
        "CUDAExecutionProvider. Please reference https://onnxruntime.ai/docs/execution-providers/"
        "CUDA-ExecutionProvider.html#requirements to ensure all dependencies are met.\n",
        "driver", "catalog:onnxruntime."),
    "numba-no-driver": (
        "numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: \n"
        "CUDA driver library cannot be found.\n"
        "If you are sure that a CUDA driver is installed,\n"
        "try setting environment variable NUMBA_CUDA_DRIVER\n"
        "with the file path of the CUDA driver shared library.\n",
        "driver", "catalog:numba.driver_not_found"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(JOBS))
def test_a_job_that_prints_only_a_library_s_failure_is_diagnosed_by_it(tmp_path: Path, name: str) -> None:
    text, cause, rule = JOBS[name]
    d = _diagnose_files(tmp_path, {"n/stderr.log": text})
    assert d["root_cause"] == cause, d
    assert str(d["rule"]).startswith(rule), d


@pytest.mark.parametrize(("line", "row", "cause"), [
    # a file cut short is the disk or the download; a header written wrong is more often the writer's
    ("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
     "safetensors.file_truncated", "storage"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered",
     "safetensors.file_truncated", "storage"),
    ("SafetensorError: Error while deserializing header: invalid JSON in header: unknown variant ``",
     "safetensors.header_invalid", "code_bug"),
    # a code the library names is the code's: Numba's CUresult name, llama.cpp's and Triton's CUDA strings
    ("numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY",
     "numba.driver_call_failed", "gpu_oom"),
    ("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected", "llama_cpp.cuda_init_failed",
     "driver"),
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 1: cudaMalloc failed: out of memory",
     "llama_cpp.cuda_malloc_failed", "gpu_oom"),
    ("CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version ; GPU=0 ; hostname=n1 ; "
     "file=/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_execution_provider.cc ; line=245 ; "
     "expr=cudaSetDevice(info_.device_id);", "onnxruntime.cuda_call_failed", "driver"),
    # a toolkit older than the GPU, and a GPU older than the kernels
    ("ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'", "nvcc.ptxas_gpu_name_unknown", "driver"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "flash_attn.gpu_arch_unsupported", "code_bug"),
    # a download that ended short of its size, and a checkpoint cut short
    ("OSError: Consistency check failed: file should be of size 9976576152 but has size 3221225472 "
     "(model-00001-of-00002.safetensors).", "huggingface_hub.download_size_mismatch", "network"),
    ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
     "pytorch.checkpoint_zip_corrupt", "storage"),
])  # fmt: skip
def test_a_library_s_line_is_read_as_its_cause(line: str, row: str, cause: str) -> None:
    best = CATALOG.best(line)
    assert best is not None and (best.id, best.cause) == (row, cause), best
