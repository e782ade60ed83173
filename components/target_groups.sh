# The drain's attributes on every target group of the NLB whose DNS name is $NLB_HOSTNAME, read
# back after they are set: `components.balancer` runs it with the AWS CLI, as whoever runs
# `pulumi up`. Environment: AWS_REGION; NLB_HOSTNAME; TARGET_GROUP_ATTRIBUTES, "key=value ..."
# (the plan's numbers and "false": no white space or glob character in any).
set -euf
lb=$(aws elbv2 describe-load-balancers --region "$AWS_REGION" \
  --query "LoadBalancers[?DNSName=='$NLB_HOSTNAME'].LoadBalancerArn" --output text)
if [ -z "$lb" ] || [ "$lb" = None ]; then
  echo "no load balancer in $AWS_REGION has the DNS name $NLB_HOSTNAME" >&2
  exit 1
fi
groups=$(aws elbv2 describe-target-groups --region "$AWS_REGION" --load-balancer-arn "$lb" \
  --query 'TargetGroups[].TargetGroupArn' --output text)
if [ -z "$groups" ] || [ "$groups" = None ]; then
  echo "the load balancer $lb has no target group" >&2
  exit 1
fi
shorthand=""
for pair in $TARGET_GROUP_ATTRIBUTES; do
  shorthand="$shorthand Key=${pair%%=*},Value=${pair#*=}"
done
for group in $groups; do
  # shellcheck disable=SC2086 # one word per attribute, split on purpose (globbing is off: -f)
  aws elbv2 modify-target-group-attributes --region "$AWS_REGION" --target-group-arn "$group" \
    --attributes $shorthand >/dev/null
  for pair in $TARGET_GROUP_ATTRIBUTES; do
    value=$(aws elbv2 describe-target-group-attributes --region "$AWS_REGION" \
      --target-group-arn "$group" --query "Attributes[?Key=='${pair%%=*}'].Value" --output text)
    if [ "$value" != "${pair#*=}" ]; then
      echo "$group: ${pair%%=*} reads $value after it was set to ${pair#*=}" >&2
      exit 1
    fi
  done
  echo "$group: $TARGET_GROUP_ATTRIBUTES"
done
