"""Developer tools, run from a checkout (`python tools/NAME.py ...`): not part of the installed package.

- `strip_notebooks.py`: strips outputs, execution counts and widget state from notebooks before a commit;
- `dispatch_tables.py`: writes each case study's shipped dispatch table from its recorded benchmark.
"""
