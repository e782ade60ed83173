"""The stack configuration model's checks and derived views, apart from its keys: the field
validators and the cross-checks that run when a `StackConfig` is built, and the properties the
planner reads. `infra.plan.config.StackConfig` declares the keys and inherits these."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any

from pydantic import (
    BaseModel,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.manifests import images
from infra.plan import catalog, prices
from infra.plan.config_parts import (
    _IAM_FIX,
    _REPO_ID,
    IAM_PRINCIPAL_ARN,
    IMAGE_DIGEST,
    PRIVATE_RANGES,
    THIS_NETWORK,
    ZONE_ID,
    ZONE_NAME,
    ConfigError,
)


class StackChecks(BaseModel):
    """What `StackConfig` checks and derives; the keys are declared there (pydantic runs these
    validators on the subclass's fields: `check_fields=False`)."""

    @field_validator("allowed_cidrs", check_fields=False)
    @classmethod
    def _client_ranges(
        cls, value: tuple[ipaddress.IPv4Network, ...]
    ) -> tuple[ipaddress.IPv4Network, ...]:
        """Ranges no client's packets can come from, refused before any rule that would
        suggest how to admit them (a field validator runs before the model's checks)."""
        for network in value:
            if network.subnet_of(THIS_NETWORK):
                raise ConfigError(
                    "allowedCidrs",
                    f'holds {network}, in 0.0.0.0/8 (RFC 1122 "this network"), addresses no '
                    "client can come from",
                    "list your own address as a /32 (`curl -s https://checkip.amazonaws.com` "
                    "prints it) or your clients' ranges",
                )
            if network.is_loopback or network.is_link_local:
                raise ConfigError(
                    "allowedCidrs",
                    f"holds {network}, a loopback or link-local range no client can come from",
                    "list your clients' ranges, such as 203.0.113.0/24",
                )
        return value

    @field_validator("availability_zone", "control_plane_zone", check_fields=False)
    @classmethod
    def _zone_shape(cls, value: str) -> str:
        if value != "auto" and not (ZONE_NAME.fullmatch(value) or ZONE_ID.fullmatch(value)):
            raise ValueError("must be an availability zone name or zone ID")
        return value

    @field_validator("cluster_admin_arns", "cluster_viewer_arns", check_fields=False)
    @classmethod
    def _iam_principals(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        key = "clusterAdminArns" if info.field_name == "cluster_admin_arns" else "clusterViewerArns"
        for arn in value:
            if ":assumed-role/" in arn:
                raise ConfigError(
                    key,
                    f"{arn} is an assumed-role session, which access entries do not take",
                    "give the role's ARN, arn:aws:iam::<account>:role/<name>",
                )
            if not IAM_PRINCIPAL_ARN.fullmatch(arn):
                raise ConfigError(key, f"{arn!r} is not an IAM role or user ARN", _IAM_FIX)
        if len(set(value)) != len(value):
            raise ConfigError(key, "lists a principal twice", "list each ARN once")
        return value

    @field_validator("kubernetes_version", mode="before", check_fields=False)
    @classmethod
    def _version_is_text(cls, value: Any) -> Any:
        # YAML reads 1.30 as the number 1.3: a version must be written as text.
        if isinstance(value, float | int):
            raise ConfigError(
                "kubernetesVersion",
                f"{value} was read as a number",
                f'quote it, such as "{catalog.DEFAULT_KUBERNETES_VERSION}"',
            )
        return value

    @field_validator("model", check_fields=False)
    @classmethod
    def _model_repo_id(cls, value: str) -> str:
        if not _REPO_ID.fullmatch(value):
            raise ConfigError(
                "model",
                f"{value!r} is not a Hugging Face repository id (owner/name of letters, digits, "
                "`.`, `_` and `-`; it reaches the vLLM command line, where `$(` would expand)",
                "use an id such as google/gemma-4-12B-it",
            )
        return value

    @field_validator("vllm_image", check_fields=False)
    @classmethod
    def _image_pinned(cls, value: str) -> str:
        # A set image must name its digest: a registry can move a tag under the same name. Runs
        # only on a set value; the pin file's default, until `make pin-images` gives it a digest,
        # is a placeholder `pulumi up` refuses (`infra.plan.placeholders`).
        reference, _, digest = value.partition("@")
        name, _, tag = reference.rpartition(":")
        if not name or "/" in tag or tag in ("", "latest"):
            raise ValueError("must be a version tag and its digest, repository:tag@sha256:...")
        if not digest:
            raise ConfigError(
                "vllmImage",
                f"{value} is pinned by a tag only, which a registry can move",
                f"pin it by digest as {value}@sha256:<the index's digest>, or drop the key "
                "and run `make pin-images`, which pins the default's",
            )
        if not IMAGE_DIGEST.fullmatch(digest):
            raise ConfigError(
                "vllmImage",
                f"{value} has a malformed digest",
                f"write it as {reference}@sha256:<64 hex digits>",
            )
        return value

    @field_validator("tags", check_fields=False)
    @classmethod
    def _tags_reserved(cls, value: dict[str, str]) -> dict[str, str]:
        managed = {
            "project": "the project name",
            "stack": "the stack name",
            "owner": "the `owner` key",
            "endDate": "the `endDate` key",
        }
        for key, text in value.items():
            # The NLB gets the tags through a "k=v,k=v" annotation that the cloud provider splits
            # on "," and "=" (cloud-provider-aws pkg/providers/v1/aws_loadbalancer.go,
            # getKeyValuePropertiesFromAnnotation).
            if {",", "="} & set(key + text):
                raise ConfigError(
                    "tags",
                    f"{key}={text} contains ',' or '=', which the load balancer's tag annotation "
                    "cannot carry",
                    "remove those characters from the tag",
                )
        clash = sorted(set(managed) & set(value))
        if clash:
            raise ConfigError(
                "tags",
                f"may not set the managed tag {clash[0]!r}",
                f"remove it; it comes from {managed[clash[0]]}",
            )
        return value

    def _check_image(self) -> None:
        # The default too: the pin file records the platforms `make pin-images` read from the
        # registry, and every node is Graviton (arm64); an index without arm64 cannot start.
        pin = images.recorded(self.vllm_image)
        if pin is None or not pin.missing():
            self._check_image_repository()
            return
        listed = ", ".join(pin.platforms or ()) or "no platform"
        raise ConfigError(
            "vllmImage",
            f"{self.vllm_image} is an index without {', '.join(pin.missing())} (it lists "
            f"{listed}, as `make pin-images` read it), and every node is Graviton (arm64)",
            "choose a tag whose index lists linux/arm64, set it in "
            "components/manifests/images.json and run `make pin-images`",
        )

    def _check_image_repository(self) -> None:
        """vLLM's other repositories (vllm/vllm-openai is its CUDA build) pull and then fail on
        a CPU node: an image comes from the pin file's CPU arm64 repository, or is marked as the
        user's own build."""
        known = images.PINS["vllm"].repository
        repository = self.vllm_image.partition("@")[0].rpartition(":")[0]
        if repository == known or self.vllm_image_own_build:
            return
        raise ConfigError(
            "vllmImage",
            f"{self.vllm_image} is not from {known}, the vLLM CPU arm64 repository the pin file "
            "(components/manifests/images.json) lists, and other builds of vLLM do not run on "
            "Graviton's CPUs",
            f"use a {known} tag ending in -arm64 and its digest, or set `vllmImageOwnBuild: "
            "true` if it is your own CPU arm64 build",
        )

    @model_validator(mode="after")
    def _cross_checks(self) -> StackChecks:
        for key, zone in (
            ("availabilityZone", self.availability_zone),
            ("controlPlaneZone", self.control_plane_zone),
        ):
            # A zone ID's region is checked at preview, against the account's zones.
            if ZONE_NAME.fullmatch(zone) and not zone.startswith(self.region):
                raise ConfigError(
                    key,
                    f"{zone} is not a zone of region {self.region}",
                    f"use a zone such as {self.region}a, or change `region`",
                )
        both = sorted(set(self.cluster_admin_arns) & set(self.cluster_viewer_arns))
        if both:
            raise ConfigError(
                "clusterViewerArns",
                f"{both[0]} is in `clusterAdminArns` too (EKS allows one access entry per "
                "principal)",
                "keep it in one of the two lists",
            )
        if self.control_plane_zone == self.availability_zone:
            raise ConfigError(
                "controlPlaneZone",
                "must differ from `availabilityZone` (EKS needs subnets in two zones)",
                "choose another zone of the region, or auto",
            )
        if not 16 <= self.vpc_cidr.prefixlen <= 18:
            raise ConfigError(
                "vpcCidr",
                f"{self.vpc_cidr} must be a /16 to /18 (four /20 subnets are cut from it)",
                "use a range such as 10.42.0.0/16",
            )
        self._check_existing_cluster()
        self._check_image()
        self._check_front_door()
        self._check_vllm_key()  # the gatekeeper's keys' (`infra.plan.gatekeeper_keys`)
        self._check_weights()
        self._check_elastic()
        if self.model_profile is None and self.model not in catalog.MODELS:
            known = ", ".join(sorted(catalog.MODELS))
            raise ConfigError(
                "model",
                f"{self.model} is not in the catalogue ({known})",
                "choose one of those, or describe the model in `modelProfile`",
            )
        return self

    def _check_existing_cluster(self) -> None:
        """`existingCluster` makes the cluster a layer the stack reads: the keys of the network
        and cluster it would create are refused, and so is an elastic stack, whose Cluster
        Autoscaler and KEDA the cluster may already run (`existing_keys`). Without it, its
        companions mean nothing, and the endpoint's ranges are required."""
        if self.existing_cluster is None:
            for key, value in (
                ("existingClusterSubnet", self.existing_cluster_subnet),
                ("lwsInstalled", self.lws_installed),
            ):
                if value:
                    raise ConfigError(
                        key,
                        "is read only with `existingCluster` (a cluster the stack creates has "
                        "its own subnets and no LWS)",
                        "remove it, or set `existingCluster`",
                    )
            if self.endpoint_public_access_cidrs is None:
                raise ConfigError(
                    "endpointPublicAccessCidrs",
                    "is required",
                    "list the IPv4 ranges of your operators and CI runners, such as "
                    "198.51.100.0/24",
                )
            return
        from infra.plan import existing_keys  # the existing-cluster layer's checks

        existing_keys.check(self)

    @property
    def gatekeeper(self) -> bool:
        """The gatekeeper checks the key (`frontDoor: gatekeeper`); else vLLM checks it itself."""
        return self.front_door == "gatekeeper"

    def _check_weights(self) -> None:
        """A named checkpoint is a quantized one: the bf16 weights are `model` itself."""
        if self.weights == "bf16" and self.weights_source != "quantize":
            raise ConfigError(
                "weightsSource",
                f"names {self.weights_source}, but `weights` is bf16, whose checkpoint is "
                "`model` at `modelRevision`",
                "set `weights` to the checkpoint's format (int8 or int4), or set "
                "`weightsSource` to quantize",
            )

    def _check_front_door(self) -> None:
        """An internet-facing endpoint uses TLS: the API key must not cross the internet in
        clear text. Plain HTTP is left for private clients and, when asked for, single
        addresses (a short test from one machine)."""
        if self.tls_certificate_arn is not None:
            arn_region = self.tls_certificate_arn.split(":")[3]
            if arn_region != self.region:
                raise ConfigError(
                    "tlsCertificateArn",
                    f"is in {arn_region}, but the load balancer runs in `region` {self.region} "
                    "and can use only a certificate of its own region",
                    f"request or import the certificate in ACM in {self.region}",
                )
            return
        if self.private_clients_only:
            return
        public = [c for c in self.allowed_cidrs if not any(c.subnet_of(p) for p in PRIVATE_RANGES)]
        if self.allow_plain_http and all(c.prefixlen == 32 for c in public):
            return
        waiver = (
            "and `allowPlainHttp` admits single addresses (/32) only"
            if self.allow_plain_http
            else "so the API key would cross the internet in clear text"
        )
        whole = " (the whole internet)" if public[0].prefixlen == 0 else ""
        raise ConfigError(
            "allowedCidrs",
            f"{public[0]}{whole} reaches beyond private ranges without a `tlsCertificateArn`, "
            f"{waiver}",
            # With `allowPlainHttp` already set, the fix left is the user's own address.
            "list your own address as a /32 (`curl -s https://checkip.amazonaws.com` prints it), "
            f"or set `tlsCertificateArn` to an ACM certificate in {self.region}"
            if self.allow_plain_http
            else f"set `tlsCertificateArn` to an ACM certificate in {self.region}, list only "
            "private ranges, or set `allowPlainHttp: true` with one /32 for a short test",
        )

    @property
    def elastic(self) -> bool:
        """Groups follow the queue and the clock (`minGroups` and `maxGroups` set); otherwise the
        stack keeps `replicas` groups running at all times."""
        return self.min_groups is not None

    @property
    def most_groups(self) -> int:
        """The groups the stack is sized for: `maxGroups` when elastic, else `replicas` (volumes,
        quota and alarms count every group that can run)."""
        return self.max_groups if self.max_groups is not None else self.replicas

    def _check_elastic(self) -> None:
        """The elasticity keys come together, and `replicas` does not come with them."""
        given = {"minGroups", "maxGroups", "schedule", "queuePerGroup"} & {
            type(self).model_fields[n].alias or n for n in self.model_fields_set
        }
        if given:
            from infra.plan import elastic_keys  # the elastic layer's keys, only when one is set

            elastic_keys.check(self, given)

    @property
    def private_clients_only(self) -> bool:
        """Every admitted client range is private: the load balancer is internal."""
        return all(any(c.subnet_of(p) for p in PRIVATE_RANGES) for c in self.allowed_cidrs)

    @property
    def revision(self) -> str | None:
        """The commit every rank downloads: the stack's, else the catalogue's checked one."""
        if self.model_revision != "auto":
            return self.model_revision
        return self.profile().revision

    @property
    def quantize_job(self) -> bool:
        """The stack produces its own int8 or int4 checkpoint (the quantize Job)."""
        return self.weights != "bf16" and self.weights_source == "quantize"

    @property
    def model_cache_planned(self) -> str:
        """Where the weights live: the stack's `modelCache`, except that a checkpoint the
        quantize Job produces lives on the per-rank volumes (the Job writes it there once)."""
        return "volume" if self.quantize_job else self.model_cache

    @property
    def weights_repo(self) -> tuple[str, str | None]:
        """The repository and commit every rank loads: the named checkpoint's, else `model`'s
        (for a produced checkpoint, what the Job quantizes)."""
        if self.weights_source != "quantize":
            repo, _, commit = self.weights_source.partition("@")
            return repo, commit
        return self.model, self.revision

    @property
    def kubernetes(self) -> prices.EksVersion | None:
        """The pinned Kubernetes version's EKS support window (None: not in the catalogue)."""
        return prices.EKS_VERSIONS.get(self.kubernetes_version)

    def profile(self) -> catalog.ModelProfile:
        """The model's layout in the served weight format: the stack's own description, else
        the catalogue's."""
        if self.model_profile is not None:
            return catalog.ModelProfile(
                name=self.model, weights=self.weights, **self.model_profile.model_dump()
            )
        return replace(catalog.MODELS[self.model], weights=self.weights)
