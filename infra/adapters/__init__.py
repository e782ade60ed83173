"""The planner's adapters: the stack file and Pulumi config read into the config model
(`pulumi_config`), the plan turned into the components' arguments (`wiring`) and into
Kubernetes objects (`render`, checked against Kubernetes' semantics by `semantics`), and the
plan command with its verdict text (`cli`, `verdict`). They call the planner (`infra.plan`);
the planner never calls them."""
