"""What Karpenter's AWS provider finds in the account before it launches anything.

Discovery is by tag (`karpenter.sh/discovery=<cluster>` on subnets and the security group, as an
EC2NodeClass selects them); the node role is what the EC2NodeClass names (Karpenter creates the
instance profile itself); the EKS cluster is what the EC2NodeClass validation asks for its service
CIDR (amiFamily AL2023); the AMI is selected by id, since moto has no /aws/service/eks SSM
parameters for aliases to resolve.
"""

import json

import boto3

REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
VPC_CIDR = "192.168.0.0/16"
# eksctl's layout: one /19 per zone. The VPC stays clear of the service CIDR, as EKS requires.
SUBNET_CIDRS = ["192.168.0.0/19", "192.168.32.0/19", "192.168.64.0/19"]


def _trust(service):
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def seed(endpoint, cluster, service_cidr):
    def client(service):
        return boto3.client(service, region_name=REGION, endpoint_url=endpoint)

    ec2, iam, eks = client("ec2"), client("iam"), client("eks")
    discovery = [{"Key": "karpenter.sh/discovery", "Value": cluster}]

    def tagged(resource, name):
        return [{"ResourceType": resource, "Tags": discovery + [{"Key": "Name", "Value": name}]}]

    vpc_id = ec2.create_vpc(CidrBlock=VPC_CIDR, TagSpecifications=tagged("vpc", cluster))["Vpc"]["VpcId"]
    subnets = {}
    for zone, cidr in zip(ZONES, SUBNET_CIDRS):
        subnet = ec2.create_subnet(
            VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=tagged("subnet", f"{cluster}-{zone}")
        )["Subnet"]
        subnets[zone] = subnet["SubnetId"]
    security_group_id = ec2.create_security_group(
        GroupName=f"{cluster}-node",
        Description=f"nodes of {cluster}",
        VpcId=vpc_id,
        TagSpecifications=tagged("security-group", f"{cluster}-node"),
    )["GroupId"]

    node_role = iam.create_role(
        RoleName=f"KarpenterNodeRole-{cluster}", AssumeRolePolicyDocument=_trust("ec2.amazonaws.com")
    )["Role"]
    cluster_role = iam.create_role(
        RoleName=f"{cluster}-eks-cluster", AssumeRolePolicyDocument=_trust("eks.amazonaws.com")
    )["Role"]
    eks_cluster = eks.create_cluster(
        name=cluster,
        roleArn=cluster_role["Arn"],
        resourcesVpcConfig={"subnetIds": list(subnets.values()), "securityGroupIds": [security_group_id]},
        kubernetesNetworkConfig={"serviceIpv4Cidr": service_cidr, "ipFamily": "ipv4"},
    )["cluster"]

    # moto ships several AL2023 x86_64 images (kernels 6.1, 6.12, 6.18) and a bare name filter also
    # matches ECS GPU images: the first by name is the standard one, kernel 6.1.
    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[{"Name": "name", "Values": ["al2023-ami-2023.*"]}, {"Name": "architecture", "Values": ["x86_64"]}],
    )["Images"]
    ami = min(images, key=lambda image: image["Name"])

    return {
        "region": REGION,
        "vpcId": vpc_id,
        "subnets": subnets,
        "securityGroupId": security_group_id,
        "nodeRoleName": node_role["RoleName"],
        "nodeRoleArn": node_role["Arn"],
        "amiId": ami["ImageId"],
        "amiName": ami["Name"],
        "cluster": {
            "name": eks_cluster["name"],
            "arn": eks_cluster["arn"],
            "endpoint": eks_cluster["endpoint"],
            "certificateAuthority": eks_cluster["certificateAuthority"]["data"],
            "serviceIpv4Cidr": eks_cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"],
        },
    }
