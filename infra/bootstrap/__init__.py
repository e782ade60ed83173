"""The AWS side of CI, as its own small Pulumi project (`infra/bootstrap/Pulumi.yaml`).

Run once per AWS account by a person with IAM rights, before the first preview: it creates the
GitHub OIDC provider and one role per GitHub environment, each trusting only that environment's
jobs in its own workflow file (`repo:<owner>/<repo>:environment:<env>:job_workflow_ref:...`, under
the repository's OIDC subject template, `access.subject_template_command`). It is a separate
project, not a flag of the main program, because the main program runs under those very roles: a
stack that could edit the role it runs as could widen its own rights, the OIDC provider is one per
account while the main program has one stack per environment, and the preview role must exist
before the first preview can run.

- `infra.bootstrap.access`: which environments, roles, subjects and permissions (pure).
- `infra.bootstrap.config`: the bootstrap stack's validated config.
- `infra/bootstrap/__main__.py`: the program (`pulumi -C infra/bootstrap up`).
"""
