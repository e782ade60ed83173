"""gemma-graviton's Python code.

`infra/__main__.py` is the Pulumi program; `infra/adapters/pulumi_config.py` reads its stack
config. The packages beside them never touch the cloud:

- `infra.plan`: stack file -> validated config -> plan -> manifest specs (pure), and the
  `python -m infra.plan` command; the program imports it.
- `infra.saved_plan`: whether `pulumi up --plan` can apply a saved plan (deploy-prod.yml).

`infra/bootstrap/` is a second, separate Pulumi project (its own `Pulumi.yaml` and stack file): the
GitHub OIDC provider and the CI roles, run once per AWS account.

The developer tools (the rehearsal, the benchmark, the doc generators, image pinning, the
environment builder) live in `tools/`, outside the product: they import it, it never imports them
(`tests/program/test_layout.py`).
"""
