"""The local EC2 for Karpenter's AWS provider: moto's server, with EC2's allocation rules, as
documented, in place of EC2.

Stock moto answers DescribeSpotPriceHistory with one constant price and launches a CreateFleet's
first override of its first launch-template config, whatever the allocation strategy, priorities
and prices say. Karpenter's launch decisions (and so what a NodeOverlay changes) show only if EC2's
side of the choice is made as EC2 documents it, so this launcher patches moto's EC2 before serving:

- DescribeSpotPriceHistory answers from the catalog file (re-read on every call, so a test may
  rewrite it while the server runs): one record per (instance type, zone) the catalog prices for
  spot. Types or zones without a spot price there get no record: EC2 has no spot pool for them, and
  Karpenter then treats their spot offerings as unavailable.
- CreateFleet ranks the overrides of ALL launch-template configs, in request order, for the
  capacity type it launches: on-demand `prioritized` and spot `capacity-optimized-prioritized` by
  `Priority` (an override without one ranks last, as EC2 documents); on-demand `lowest-price`
  (EC2's default) by the catalog's on-demand price; spot `lowest-price` (EC2's default),
  `price-capacity-optimized`, `capacity-optimized` and `diversified` by the catalog's spot price in
  the override's zone (every pool has the same capacity here, so capacity never outranks price).
  Overrides the catalog does not price rank after the priced ones; ties keep request order. The
  first pool that the catalog's `insufficientCapacity` list does not name receives the whole target
  capacity; each listed pool ranked before it is reported in the response's `Errors` as
  InsufficientInstanceCapacity, as EC2 reports the pools it tried.
- Instances get the launch template's security groups, as EC2 gives them: its SecurityGroupIds or
  else the groups of its primary network interface, where Karpenter puts them (moto read neither
  and gave every instance the VPC's default group, so Karpenter's SecurityGroupDrift marked every
  NodeClaim Drifted at once), and spot instances their SpotInstanceRequestId, by which Karpenter
  tells spot from on-demand.
- DescribeInstanceTypes and DescribeInstanceTypeOfferings answer only the catalog's `offered` types
  when it lists them (a region, or an account, that offers these families): Karpenter computes every
  offered type on every launch, and moto's ~800 would make each launch cost seconds of CPU here.
- Every CreateFleet that is not a dry run is appended to the fleet log as one JSON line: what was
  asked (strategies, every override) and what was launched.
"""

import argparse
import datetime
import json
import math
import os
import threading

from moto.core.responses import ActionResult
from moto.ec2.models.fleets import Fleet
from moto.ec2.models.instance_types import InstanceTypeBackend, InstanceTypeOfferingBackend
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.spot_instances import SpotInstances
from moto.server import ThreadedMotoServer

import seed

STAND_IN = "EC2's allocation rules, as documented, in place of EC2"
PRIORITY_STRATEGIES = {"prioritized", "capacity-optimized-prioritized"}
# EC2 Fleet's documented defaults when a request names no strategy.
DEFAULT_STRATEGY = {"on-demand": "lowest-price", "spot": "lowest-price"}
LINUX = {"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}
UNRANKED = math.inf


def read_catalog(path):
    """(prices per instance type, the set of (instance type, zone, capacity type) without capacity)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    full = {(p["instanceType"], p["zone"], p["capacityType"]) for p in raw.get("insufficientCapacity", [])}
    return raw.get("prices", {}), full


def read_offered(path):
    """The instance types the catalog says are offered, or None for every type moto knows."""
    with open(path, encoding="utf-8") as f:
        offered = json.load(f).get("offered")
    return None if offered is None else set(offered)


def zone_of(backend, override):
    if override.get("AvailabilityZone"):
        return override["AvailabilityZone"]
    return backend.get_subnet(override["SubnetId"]).availability_zone if override.get("SubnetId") else None


def install(catalog_path, fleet_log):
    log_lock = threading.Lock()

    def describe_spot_price_history(self):
        prices, _ = read_catalog(catalog_path)
        descriptions = set(self._get_param("ProductDescriptions", []))
        if descriptions and not descriptions & LINUX:
            return ActionResult({"SpotPriceHistory": []})
        filters = self._filters_from_querystring()

        def wanted(key, value, listed=()):
            return (not listed or value in listed) and (key not in filters or value in filters[key])

        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        types = self._get_param("InstanceTypes", [])
        history = [
            {
                "InstanceType": instance_type,
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": f"{price:.6f}",
                "AvailabilityZone": zone,
                "Timestamp": now,
            }
            for instance_type, entry in sorted(prices.items())
            if wanted("instance-type", instance_type, types)
            for zone, price in sorted(entry.get("spot", {}).items())
            if wanted("availability-zone", zone)
        ]
        return ActionResult({"SpotPriceHistory": history})

    SpotInstances.describe_spot_price_history = describe_spot_price_history

    describe_instance_types = InstanceTypeBackend.describe_instance_types
    describe_instance_type_offerings = InstanceTypeOfferingBackend.describe_instance_type_offerings

    def offered_instance_types(self, instance_types=None, filters=None):
        matches = describe_instance_types(self, instance_types, filters)
        offered = read_offered(catalog_path)
        # Types asked for by name are described whether offered or not, as EC2 describes any type.
        if offered is None or instance_types:
            return matches
        return [t for t in matches if t.get("InstanceType") in offered]

    def offered_instance_type_offerings(self, location_type=None, filters=None):
        matches = describe_instance_type_offerings(self, location_type, filters)
        offered = read_offered(catalog_path)
        return matches if offered is None else [o for o in matches if o.get("InstanceType") in offered]

    InstanceTypeBackend.describe_instance_types = offered_instance_types
    InstanceTypeOfferingBackend.describe_instance_type_offerings = offered_instance_type_offerings

    def rank_key(fleet, capacity_type, prices, spec):
        options = fleet.spot_options if capacity_type == "spot" else fleet.on_demand_options
        strategy = (options or {}).get("AllocationStrategy") or DEFAULT_STRATEGY[capacity_type]
        override = spec.overrides or {}
        if strategy in PRIORITY_STRATEGIES:
            return UNRANKED if override.get("Priority") is None else float(override["Priority"])
        entry = prices.get(spec.instance_type, {})
        if capacity_type == "spot":
            return entry.get("spot", {}).get(zone_of(fleet.ec2_backend, override), UNRANKED)
        return entry.get("onDemand", UNRANKED)

    def template_security_groups(fleet, spec):
        """The groups EC2 gives an instance of this launch template: its SecurityGroupIds, or else
        those of its primary network interface (device 0 of network card 0), which is where
        Karpenter's launch templates put them (NetworkInterfaces[0].Groups, never SecurityGroupIds).
        DescribeInstances reports the primary interface's groups as the instance's SecurityGroups."""
        template = spec.launch_template_spec
        data = fleet.ec2_backend.get_launch_template(template["LaunchTemplateId"]).get_version(template["Version"]).data
        if data.get("SecurityGroupIds"):
            return list(data["SecurityGroupIds"])
        for interface in data.get("NetworkInterfaces") or []:
            if int(interface.get("DeviceIndex", 0)) == 0 and int(interface.get("NetworkCardIndex", 0)) == 0:
                return list(interface.get("Groups") or [])
        return []

    def get_launch_spec_counts(self, weight_to_add):
        """The pool that receives the capacity, in place of moto's first override."""
        prices, full = read_catalog(catalog_path)
        # sorted() is stable: equal keys keep request order.
        ranked = sorted(self.launch_specs, key=lambda spec: rank_key(self, self.allocating, prices, spec))
        for spec in ranked:
            override = spec.overrides or {}
            zone = zone_of(self.ec2_backend, override)
            if (spec.instance_type, zone, self.allocating) in full:
                self.allocation_errors.append(
                    {
                        "LaunchTemplateAndOverrides": {
                            "LaunchTemplateSpecification": spec.launch_template_spec,
                            "Overrides": override,
                        },
                        "Lifecycle": self.allocating,
                        "ErrorCode": "InsufficientInstanceCapacity",
                        "ErrorMessage": f"We currently do not have sufficient {spec.instance_type} capacity in the Availability Zone you requested ({zone}).",
                    }
                )
                continue
            if not spec.group_set:
                spec.group_set = template_security_groups(self, spec)
            count = math.ceil(weight_to_add / spec.weighted_capacity)
            return {spec: count}, count * spec.weighted_capacity
        return {}, 0.0

    fleet_init = Fleet.__init__
    create_spot_requests = Fleet.create_spot_requests
    create_on_demand_requests = Fleet.create_on_demand_requests

    def init(self, *args, **kwargs):
        # Moto's Fleet() launches while it is constructed: its error list must exist before.
        self.allocation_errors = []
        fleet_init(self, *args, **kwargs)

    # moto's launch paths ask get_launch_spec_counts for the pool without saying which capacity
    # type they launch, and the rank depends on it.
    def launch_spot(self, weight_to_add):
        self.allocating = "spot"
        requests = create_spot_requests(self, weight_to_add)
        for request in requests:
            request.instance.spot_instance_request_id = request.id
        return requests

    def launch_on_demand(self, weight_to_add):
        self.allocating = "on-demand"
        create_on_demand_requests(self, weight_to_add)

    Fleet.__init__ = init
    Fleet.get_launch_spec_counts = get_launch_spec_counts
    Fleet.create_spot_requests = launch_spot
    Fleet.create_on_demand_requests = launch_on_demand

    create_fleet = Fleets.create_fleet

    def create_fleet_logged(self):
        result = create_fleet(self)
        fleet = self.ec2_backend.get_fleet(result.result["FleetId"])
        if fleet.type == "instant":
            result.result["Errors"] = list(fleet.allocation_errors)
        line = json.dumps(fleet_entry(fleet))
        with log_lock, open(fleet_log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        return result

    Fleets.create_fleet = create_fleet_logged


def fleet_entry(fleet):
    backend = fleet.ec2_backend
    target = fleet.target_capacity_specification
    configs = []
    for config in fleet.launch_template_configs or []:
        template = config.get("LaunchTemplateSpecification", {})
        configs.append(
            {
                "launchTemplateId": template.get("LaunchTemplateId")
                or backend.get_launch_template_by_name(template["LaunchTemplateName"]).id,
                "launchTemplateName": template.get("LaunchTemplateName"),
                "version": template.get("Version"),
                "overrides": [
                    {
                        "instanceType": o.get("InstanceType"),
                        "subnetId": o.get("SubnetId"),
                        "availabilityZone": o.get("AvailabilityZone"),
                        "priority": None if o.get("Priority") is None else float(o["Priority"]),
                        "imageId": o.get("ImageId"),
                    }
                    for o in config.get("Overrides") or []
                ],
            }
        )
    launched = [(item["instance"], "on-demand") for item in fleet.on_demand_instances]
    launched += [(request.instance, "spot") for request in fleet.spot_requests]
    return {
        "fleetId": fleet.id,
        "type": fleet.type,
        "defaultTargetCapacityType": target.get("DefaultTargetCapacityType"),
        "totalTargetCapacity": int(target.get("TotalTargetCapacity", 0)),
        "onDemandAllocationStrategy": (fleet.on_demand_options or {}).get("AllocationStrategy"),
        "spotAllocationStrategy": (fleet.spot_options or {}).get("AllocationStrategy"),
        "launchTemplateConfigs": configs,
        "launched": [
            {
                "instanceId": instance.id,
                "instanceType": instance.instance_type,
                "zone": instance.availability_zone,
                "subnetId": instance.subnet_id,
                "capacityType": capacity_type,
            }
            for instance, capacity_type in launched
        ],
        "errors": [
            {
                "instanceType": override.get("InstanceType"),
                "zone": zone_of(backend, override),
                "subnetId": override.get("SubnetId"),
                "capacityType": error["Lifecycle"],
                "code": error["ErrorCode"],
            }
            for error in fleet.allocation_errors
            for override in [error["LaunchTemplateAndOverrides"]["Overrides"]]
        ],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--catalog", required=True, help="JSON: prices per instance type, pools without capacity")
    parser.add_argument("--fleet-log", required=True, help="one JSON line per CreateFleet is appended here")
    parser.add_argument("--cluster", required=True, help="the name the seed tags with, and the EKS cluster's")
    parser.add_argument("--service-cidr", required=True, help="the EKS cluster's service CIDR")
    parser.add_argument("--seed-out", required=True, help="the seeded ids, as JSON, written once the server is ready")
    args = parser.parse_args()

    install(args.catalog, args.fleet_log)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{args.port}"
    print(f"moto on {endpoint}: {STAND_IN}", flush=True)
    ids = seed.seed(endpoint, args.cluster, args.service_cidr)
    print(f"seeded {args.cluster}: AMI {ids['amiId']} ({ids['amiName']}); {json.dumps(ids)}", flush=True)
    # Written whole, then renamed: whoever waits for the file never reads half of it.
    with open(args.seed_out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(ids, f)
    os.rename(args.seed_out + ".tmp", args.seed_out)
    threading.Event().wait()


if __name__ == "__main__":
    main()
