# The drain's attributes on every target group of the NLB whose DNS name is $NLB_HOSTNAME, read
# back after they are set: `components.balancer` runs it with the AWS CLI, as whoever runs
# `pulumi up`. Environment: AWS_REGION; NLB_HOSTNAME; NODE_PORTS and HEALTH_CHECK_INTERVAL, what
# the Service's target groups must show (a changed node port or interval is a new target group,
# which the cloud controller makes after `pulumi up` has updated the Service: until the load
# balancer holds only such groups this waits, at most WAIT_SECONDS); TARGET_GROUP_ATTRIBUTES,
# "key=value ..." (the plan's numbers and "false": no white space or glob character in any).
set -euf
lb=$(aws elbv2 describe-load-balancers --region "$AWS_REGION" \
  --query "LoadBalancers[?DNSName=='$NLB_HOSTNAME'].LoadBalancerArn" --output text)
if [ -z "$lb" ] || [ "$lb" = None ]; then
  echo "no load balancer in $AWS_REGION has the DNS name $NLB_HOSTNAME" >&2
  exit 1
fi
deadline=$(($(date +%s) + WAIT_SECONDS))
while :; do
  # A group deleted while it is listed is TargetGroupNotFound: look again. Any other error stops.
  if ! found=$(aws elbv2 describe-target-groups --region "$AWS_REGION" --load-balancer-arn "$lb" \
    --query 'TargetGroups[].[TargetGroupArn,Port,HealthCheckIntervalSeconds]' --output text \
    2>&1); then
    case "$found" in
      *TargetGroupNotFound*) found="" ;;
      *) echo "$found" >&2 && exit 1 ;;
    esac
  fi
  groups="" stale="" ports=""
  while read -r arn port interval; do
    [ -n "$arn" ] || continue
    case " $NODE_PORTS " in
      *" $port "*) ;;
      *) stale="$stale $arn" ;;
    esac
    [ "$interval" = "$HEALTH_CHECK_INTERVAL" ] || stale="$stale $arn"
    groups="$groups $arn" ports="$ports $port"
  done <<LIST
$found
LIST
  missing=""
  for port in $NODE_PORTS; do
    case " $ports " in
      *" $port "*) ;;
      *) missing="$missing $port" ;;
    esac
  done
  [ -n "$stale$missing" ] || break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "after ${WAIT_SECONDS}s the load balancer $lb still has target groups of another node" \
      "port or health check (${stale# }) or none for node ports (${missing# }); the cloud" \
      "controller has not reconciled the Service: kubectl describe service shows its events" >&2
    exit 1
  fi
  sleep 5
done
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
