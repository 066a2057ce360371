# Infra targets (CDK stack). Included from the main Makefile: `include mk/infra.mk`.
#   make synth            cdk.out/SluiceStack.template.json, skipped while its inputs' hash is unchanged
#   make synth FORCE=1    synthesize regardless
#   make lint-template    cfn-lint on the template(s) (errors fail; warnings are printed; W3005 ignored)
#   make test-infra       CDK assertion, cdk-nag and template-provisioning tests
#   make cdk-diff / cdk-deploy / cdk-destroy / cdk-bootstrap   the pinned CDK CLI (needs AWS credentials)
#   STAGE=prod make cdk-deploy   deploys CloudFormation stack `sluice-prod` (-c stage=prod); the construct
#                                id and template file stay `SluiceStack` for every stage
#   CDK_CONTEXT="-c retain_data=false -c push_lambda_targets=orders-*"   more context for the CLI targets
#   REGIONS=us-east-1,eu-west-1 make cdk-deploy   one stack per region (home first), all of them deployed

INFRA_PY        ?= .venv/bin/python
# cdk.json runs `python app.py`: put the project venv first on PATH for the CLI targets.
INFRA_CDK_CLI   ?= PATH="$(CURDIR)/.venv/bin:$$PATH" npx -y aws-cdk@2.1148.1
INFRA_CDK_FLAGS ?= --no-notices $(if $(STAGE),-c stage=$(STAGE)) $(if $(REGIONS),-c regions=$(REGIONS)) $(CDK_CONTEXT)
INFRA_STACKS    := $(if $(REGIONS),--all,SluiceStack)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: synth lint-template test-infra cdk-diff cdk-deploy cdk-destroy cdk-bootstrap

INFRA_SYNTH     := $(INFRA_PY) -m sluice.local.template synth $(if $(REGIONS),-c regions=$(REGIONS))

synth:
	$(INFRA_SYNTH) $(if $(FORCE),--force)

# cfn-lint exit codes are a bit mask: 2 = errors (fail), 4 = warnings, 8 = informational.
# Every template of the synthesis (one per region with REGIONS=...): `synth` prints their paths.
lint-template:
	@templates=$$($(INFRA_SYNTH) | cut -d' ' -f1) || exit 1; \
	  .venv/bin/cfn-lint --ignore-checks W3005 -- $$templates; rc=$$?; \
	  if [ $$((rc & 2)) -ne 0 ] || [ $$((rc & 1)) -ne 0 ]; then echo "cfn-lint: errors (exit $$rc)"; exit 1; fi; \
	  echo "cfn-lint: no errors (exit $$rc)"

test-infra:
	.venv/bin/pytest -m infra tests/infra

cdk-bootstrap:
	$(INFRA_CDK_CLI) bootstrap $(INFRA_CDK_FLAGS)

cdk-diff:
	$(INFRA_CDK_CLI) diff $(INFRA_CDK_FLAGS) $(INFRA_STACKS)

# --import-existing-resources: a stage destroyed with its data kept adopts it (docs/deploy.md).
cdk-deploy:
	$(INFRA_CDK_CLI) deploy $(INFRA_CDK_FLAGS) --require-approval broadening --import-existing-resources $(INFRA_STACKS)

cdk-destroy:
	$(INFRA_CDK_CLI) destroy $(INFRA_CDK_FLAGS) $(INFRA_STACKS)
