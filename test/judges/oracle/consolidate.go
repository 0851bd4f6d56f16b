// The judge of consolidation: Karpenter's OWN disruption code (sigs.k8s.io/karpenter
// pkg/controllers/disruption) deciding, for a generated cluster and a given set of candidate nodes,
// whether consolidation replaces them, deletes them or does nothing, in two worlds: with every
// NodeOverlay, and with only the overlays not marked "selected". Nothing of Karpenter's rules is
// re-implemented here:
//   - prices: each world's overlays go through Karpenter's NodeOverlay controller and store
//     (world.go, reconcileWorld, with the overlays' real prices, as the launch judge does), and the
//     cloud provider every disruption and provisioning call sees is the store's overlay decorator
//     (pkg/cloudprovider/overlay Decorate) over the request's catalog, as Karpenter's operator wires it;
//   - candidates: disruption.GetCandidatesWithTotals (NewCandidate: the node's price is its offering's
//     price in that world), with the world's ClusterCost (pkg/state/cost, fed by the NodeClaim informer
//     as in the operator) for each NodePool's totals; a node it does not return is answered with
//     NewCandidate's own error;
//   - the decision: computeConsolidation, the method the single- and multi-node consolidation methods
//     call, on exactly the candidates of each command, with its SimulateScheduling over Karpenter's
//     real provisioner and scheduler and its spot-to-spot rules (the feature gate is the request's
//     "spotToSpot"); for a command of several candidates, then filterOutSameInstanceType on its
//     replacement, as MultiNodeConsolidation's firstNConsolidationOption does (an error or no option
//     left: no command). Both are unexported: shim/zz_veneer_judge.go, a file of ours that the build
//     adds to Karpenter's package with `go build -overlay` (in a byte-for-byte copy of the module, as
//     the go command refuses overlays beneath GOMODCACHE: scripts/builds/40-karpenter.sh), exports
//     them and sumCandidatePrices;
//   - Balanced consolidation (a candidate's NodePool with consolidationPolicy Balanced): the
//     evaluator the disruption controller builds from those totals (NewBalancedEvaluator), asked as
//     the methods ask it (approve, below), and the ConsolidationApproved Events it publishes, as the
//     watcher would read them;
//   - the replacement: the Command's one replacement NodeClaim, its instance-type options in the order
//     computeConsolidation left them, and its spec requirements and resource requests from ToNodeClaim
//     (what the queue's CreateNodeClaims would write).
//
// The store is a controller-runtime fake client with the field indexers Karpenter's operator
// registers (pkg/operator setupIndexers; a node's pods are served from a snapshot by node, see
// podsByNode), not envtest's real kube-apiserver and etcd: a case here is
// a fresh cluster per world (NodePools, NodeClaims, Nodes, pods), written and read back thousands of
// times per `npm test`; over a real apiserver every object is an HTTP round trip and every case would
// need its own namespace-free cluster (Nodes, NodeClaims and NodePools are cluster-scoped) wiped
// between cases, so the cases could not run side by side. Measured on this project's 2-core machine
// (while a CI run was also busy): the API work alone of one case over the kit's kube-apiserver and
// etcd (create 2 NodePools and 5-20 NodeClaims, Nodes and two pods each with their statuses, list a
// node's pods three times per node, delete it all), sequentially, came to 0.44 cases per second
// (2.3 s a case, without any of Karpenter's computation); this judge answers about 21 one-command
// cases per second, and about 90 commands per second at ten commands per cluster, both worlds and
// Karpenter's computation included. Cluster state is fed the way Karpenter's informers feed it
// (pkg/controllers/state/informer: Node and NodeClaim Reconcile).
//
// That the fake client answers as the real store would is cross-checked, not assumed. With
// VENEER_JUDGE_KUBECONFIG naming a kubeconfig, the judge stores each world in that kube-apiserver
// instead, one world at a time (apiserver_store.go: written as Karpenter's envtest tests write
// objects, read through an informer cache with the operator's field indexes, deleted afterwards),
// and test/judges/consolidation-envtest.test.ts asks a seeded sample of the differential's
// generated clusters of both and requires identical answers (every command in both worlds:
// decision, candidatePrice, reason, error, replacement; and the statuses). What that proves: on
// these clusters the real apiserver's UIDs, creation timestamps (its now, not the judge's clock),
// generations, CRD defaults (expireAfter 720h, ...) and pod defaults and admission (QoS class,
// default tolerations) change no answer of Karpenter's, and the fake client's store, its indexes
// and the pod snapshot of podsByNode serve what Karpenter reads there. Measured on the 2-core
// machine: 50 clusters, 300 world-commands (87 replace, 120 delete, 93 none), 1.5 s per cluster
// over the apiserver, and 150 more (seed 777, 964 world-commands, 240 replace) at 1.7 s per cluster
// beside another test run, without one disagreement. The one step of a real cluster's controllers
// the apiserver store takes itself (no kube-controller-manager runs there) is visible in it: with
// TaintNodesByCondition's not-ready taint left on the Ready nodes (Karpenter keeps it on an
// initialized node, StateNode.Taints), 3 of 6 clusters answered otherwise.
//
// What is asked is computeConsolidation (and for several candidates filterOutSameInstanceType) on
// exactly the given candidates: the methods' other filters around it are not applied
// (ShouldDisrupt, which leaves empty nodes to the Emptiness method and skips NodePools with
// consolidation off or WhenEmpty; budgets; multi-node consolidation's candidate ordering and binary
// search; the 15-second re-validation). Balanced's approval is answered beside the decision.
//
// The cluster: every node is a Karpenter-managed, registered, initialized node with its NodeClaim
// (conditions Launched, Registered, Initialized, Consolidatable), labelled as Karpenter labels it:
// the instance type's single-valued requirements, the NodePool's template labels, instance type,
// zone, capacity type, NodePool, node class, hostname, registered and initialized. Its pods are bound
// to it, Running, owned by a ReplicaSet (reschedulable), with its pod-deletion-cost where the request
// gives one; no PDBs, no DaemonSets.
//
// Request: {"consolidate": {"instanceTypes", "nodePools" (each also "weight", "consolidateAfter"
// (default "0s"), "consolidationPolicy" (default WhenEmptyOrUnderutilized), "limits"), "overlays" (each with
// "selected"), "nodes": [{"name", "nodePool", "instanceType", "zone", "capacityType", "pods":
// [{"cpu", "memory", "deletionCost"}]}], "commands": [["n1"], ["n2", "n3"]], "spotToSpot"}}. Answer: {"statuses",
// "statusesWithout", "commands": [{"with", "without"}], "error"}; each world's command is
// {"decision": "replace" | "delete" | "none", "candidatePrice", "reason", "replacement":
// {"nodePool", "requirements", "requests", "instanceTypes"}, "balanced": {"approved", "approvals":
// {NodePool: message}}, "error"}. candidatePrice is sumCandidatePrices when
// computeConsolidation reached its price comparison (a replacement; or none with all pods scheduled
// onto exactly one new NodeClaim, which a second SimulateScheduling tells), else 0. reason is the
// Unconsolidatable message Karpenter published while computing (single-candidate commands only:
// Karpenter publishes none for multi-node ones), "filterOutSameInstanceType: <why>" where that
// left no command, or "not a candidate: <NewCandidate's error>".
// The process's environment variable VENEER_JUDGE_KUBECONFIG (a kubeconfig file with admin rights,
// Karpenter's CRDs installed) makes the apiserver the store of every consolidation world (above).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/awslabs/operatorpkg/status"
	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers/disruption"
	"sigs.k8s.io/karpenter/pkg/controllers/dynamicresources/deviceallocation"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	pscheduling "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/controllers/state/informer"
	"sigs.k8s.io/karpenter/pkg/events"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/state/cost"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"
	coretest "sigs.k8s.io/karpenter/pkg/test"
	"sigs.k8s.io/karpenter/pkg/utils/pdb"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

func init() {
	consolidateJudge = func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req consolidateRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, badRequest{err}
		}
		return judgeConsolidation(ctx, req)
	}
}

type podIn struct {
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	// DeletionCost is the pod's controller.kubernetes.io/pod-deletion-cost annotation: its eviction
	// cost, which Balanced consolidation's disruption cost sums (disruption utils EvictionCost).
	DeletionCost string `json:"deletionCost,omitempty"`
}

type consolidateNodeIn struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Pods         []podIn `json:"pods"`
}

type consolidateNodePoolIn struct {
	nodePoolIn
	Weight              *int32  `json:"weight"`
	ConsolidateAfter    *string `json:"consolidateAfter"`
	ConsolidationPolicy string  `json:"consolidationPolicy"`
	// Limits is spec.limits: the scheduler leaves out a type whose capacity is over what the
	// NodePool's other nodes leave of them (filterByRemainingResources).
	Limits map[string]string `json:"limits"`
}

type consolidateRequest struct {
	InstanceTypes []instanceTypeIn        `json:"instanceTypes"`
	NodePools     []consolidateNodePoolIn `json:"nodePools"`
	Overlays      []overlayIn             `json:"overlays"`
	Nodes         []consolidateNodeIn     `json:"nodes"`
	Commands      [][]string              `json:"commands"`
	SpotToSpot    bool                    `json:"spotToSpot"`
	// Drift computes each command (one node) as Drift.ComputeCommands does for a drifted node:
	// its pods scheduled without it, no price test.
	Drift bool `json:"drift"`
}

type replacementOut struct {
	NodePool      string                                    `json:"nodePool"`
	Requirements  []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	Requests      corev1.ResourceList                       `json:"requests,omitempty"`
	InstanceTypes []string                                  `json:"instanceTypes"`
	// PriceOverlayApplied is ToNodeClaim's karpenter.sh/price-overlay-applied: an overlay priced an
	// offering of one of its types when the command was computed.
	PriceOverlayApplied bool `json:"priceOverlayApplied"`
}

type worldCommand struct {
	Decision       string          `json:"decision"`
	CandidatePrice float64         `json:"candidatePrice"`
	Reason         string          `json:"reason,omitempty"`
	Replacement    *replacementOut `json:"replacement,omitempty"`
	Balanced       *balancedOut    `json:"balanced,omitempty"`
	Error          string          `json:"error,omitempty"`
}

// balancedOut is Balanced consolidation's verdict on a replacement whose candidates include a
// Balanced NodePool's: whether it approves the command, and the message of each ConsolidationApproved
// Event it publishes then, by NodePool (on the candidate's NodeClaim for one node, on the NodePool
// for several).
type balancedOut struct {
	Approved  bool              `json:"approved"`
	Approvals map[string]string `json:"approvals,omitempty"`
}

type commandAnswer struct {
	With    worldCommand `json:"with"`
	Without worldCommand `json:"without"`
}

type consolidateAnswer struct {
	Statuses        map[string]statusOut `json:"statuses"`
	StatusesWithout map[string]statusOut `json:"statusesWithout"`
	Commands        []commandAnswer      `json:"commands"`
	Error           string               `json:"error,omitempty"`
}

// managedCatalog is the request's catalog as a cloud provider that supports the EC2NodeClass: the
// NodePools (whose nodeClassRef names one) are then Karpenter-managed (nodepoolutils.IsManaged), as
// under the AWS provider.
type managedCatalog struct{ *catalog }

func (managedCatalog) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&awsv1.EC2NodeClass{}}
}

// recorder keeps the events Karpenter publishes (it is asked from one goroutine at a time per
// world, but the scheduler may publish from others).
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Publish(evts ...events.Event) {
	r.mu.Lock()
	r.events = append(r.events, evts...)
	r.mu.Unlock()
}

func (r *recorder) take() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// unconsolidatable is the first Unconsolidatable message among the events.
func unconsolidatable(evts []events.Event) string {
	for _, e := range evts {
		if e.Reason == events.Unconsolidatable {
			return e.Message
		}
	}
	return ""
}

// clusterScheme: Karpenter's types (karpenterScheme's) and the built-in groups Karpenter's state,
// provisioner and disruption code read (pods, nodes, DaemonSets, PDBs, storage).
var clusterScheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	for gvk, t := range karpenterScheme.AllKnownTypes() {
		s.AddKnownTypeWithName(gvk, reflect.New(t).Interface().(kruntime.Object))
	}
	for _, add := range []func(*kruntime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, storagev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// The field indexers Karpenter's operator registers (pkg/operator/operator.go setupIndexers).
func withIndexers(b *fake.ClientBuilder) *fake.ClientBuilder {
	return b.
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}).
		WithIndex(&v1.NodeClaim{}, "status.providerID", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Group}
		}).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Kind}
		}).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Name}
		}).
		WithIndex(&v1.NodePool{}, "spec.template.spec.nodeClassRef.group", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Group}
		}).
		WithIndex(&v1.NodePool{}, "spec.template.spec.nodeClassRef.kind", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Kind}
		}).
		WithIndex(&v1.NodePool{}, "spec.template.spec.nodeClassRef.name", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Name}
		})
}

var nodeClassRef = v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}

// clusterObjects are the request's NodePools, NodeClaims, Nodes and pods as the API server would
// hold them; the same objects go into both worlds (each gets its own copies).
func clusterObjects(req consolidateRequest) ([]client.Object, error) {
	pools := map[string]consolidateNodePoolIn{}
	var objects []client.Object
	for _, np := range req.NodePools {
		pools[np.Name] = np
		policy := v1.ConsolidationPolicyWhenEmptyOrUnderutilized
		if np.ConsolidationPolicy != "" {
			policy = v1.ConsolidationPolicy(np.ConsolidationPolicy)
		}
		after := "0s"
		if np.ConsolidateAfter != nil {
			after = *np.ConsolidateAfter
		}
		consolidateAfter := v1.NillableDuration{}
		if err := consolidateAfter.UnmarshalJSON([]byte(strconvQuote(after))); err != nil {
			return nil, badRequest{fmt.Errorf("NodePool %q: consolidateAfter %q: %w", np.Name, after, err)}
		}
		pool := &v1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: np.Name, Generation: 1, UID: types.UID("nodepool-" + np.Name)},
			Spec: v1.NodePoolSpec{
				Weight: np.Weight,
				Template: v1.NodeClaimTemplate{
					ObjectMeta: v1.ObjectMeta{Labels: np.Labels},
					Spec:       v1.NodeClaimTemplateSpec{Requirements: np.Requirements, NodeClassRef: lo.ToPtr(nodeClassRef)},
				},
				Disruption: v1.Disruption{ConsolidationPolicy: policy, ConsolidateAfter: consolidateAfter, Budgets: []v1.Budget{{Nodes: "100%"}}},
			},
		}
		if len(np.Limits) > 0 {
			pool.Spec.Limits = v1.Limits{}
			for name, q := range np.Limits {
				quantity, err := resource.ParseQuantity(q)
				if err != nil {
					return nil, badRequest{fmt.Errorf("NodePool %q: limit %s %q: %w", np.Name, name, q, err)}
				}
				pool.Spec.Limits[corev1.ResourceName(name)] = quantity
			}
		}
		// Ready, as Karpenter's NodePool status controllers leave a valid NodePool whose node class is ready.
		pool.StatusConditions().SetTrue(v1.ConditionTypeValidationSucceeded)
		pool.StatusConditions().SetTrue(v1.ConditionTypeNodeClassReady)
		pool.StatusConditions().SetTrue(v1.ConditionTypeNodeRegistrationHealthy)
		objects = append(objects, pool)
	}
	its := map[string]instanceTypeIn{}
	for _, it := range req.InstanceTypes {
		its[it.Name] = it
	}
	for _, n := range req.Nodes {
		pool, ok := pools[n.NodePool]
		if !ok {
			return nil, badRequest{fmt.Errorf("node %q: no NodePool %q", n.Name, n.NodePool)}
		}
		it, ok := its[n.InstanceType]
		if !ok {
			return nil, badRequest{fmt.Errorf("node %q: no instance type %q", n.Name, n.InstanceType)}
		}
		if n.Zone == "" || n.CapacityType == "" {
			return nil, badRequest{fmt.Errorf("node %q: zone and capacityType are required", n.Name)}
		}
		// The labels a launched node carries: the instance type's single-valued requirements (as
		// the cloud provider's NodeClaim has them), the template's labels, and Karpenter's own.
		labels := map[string]string{}
		for _, r := range it.Requirements {
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				labels[r.Key] = r.Values[0]
			}
		}
		labels = lo.Assign(labels, pool.Labels, map[string]string{
			v1.NodePoolLabelKey:                            n.NodePool,
			corev1.LabelInstanceTypeStable:                 n.InstanceType,
			corev1.LabelTopologyZone:                       n.Zone,
			v1.CapacityTypeLabelKey:                        n.CapacityType,
			corev1.LabelHostname:                           n.Name,
			v1.NodeClassLabelKey(nodeClassRef.GroupKind()): nodeClassRef.Name,
			v1.NodeRegisteredLabelKey:                      "true",
			v1.NodeInitializedLabelKey:                     "true",
		})
		providerID := "aws:///" + n.Zone + "/" + n.Name
		capacity := corev1.ResourceList{}
		for k, v := range it.Capacity {
			capacity[k] = v.DeepCopy()
		}
		// What Karpenter writes at launch: the instance type's Allocatable, capacity less its overhead.
		allocatable := resources.Subtract(capacity, it.Overhead)
		nodeClaim := &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID("nodeclaim-" + n.Name), Labels: labels, CreationTimestamp: metav1.NewTime(epoch)},
			Spec: v1.NodeClaimSpec{
				Requirements: pool.Requirements,
				NodeClassRef: lo.ToPtr(nodeClassRef),
			},
			Status: v1.NodeClaimStatus{ProviderID: providerID, NodeName: n.Name, Capacity: capacity, Allocatable: allocatable},
		}
		for _, c := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeConsolidatable} {
			nodeClaim.StatusConditions(status.WithClock(clocktesting.NewFakeClock(epoch))).SetTrue(c)
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID("node-" + n.Name), Labels: labels, CreationTimestamp: metav1.NewTime(epoch)},
			Spec:       corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{
				Phase:       corev1.NodeRunning,
				Capacity:    capacity,
				Allocatable: allocatable,
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(epoch), LastTransitionTime: metav1.NewTime(epoch), Reason: "KubeletReady"}},
			},
		}
		objects = append(objects, nodeClaim, node)
		for i, p := range n.Pods {
			requests := corev1.ResourceList{}
			for name, value := range map[corev1.ResourceName]string{corev1.ResourceCPU: p.CPU, corev1.ResourceMemory: p.Memory} {
				if value == "" {
					continue
				}
				q, err := resource.ParseQuantity(value)
				if err != nil {
					return nil, badRequest{fmt.Errorf("node %q pod %d: %s %q: %w", n.Name, i, name, value, err)}
				}
				requests[name] = q
			}
			name := fmt.Sprintf("%s-pod-%d", n.Name, i)
			var annotations map[string]string
			if p.DeletionCost != "" {
				annotations = map[string]string{corev1.PodDeletionCost: p.DeletionCost}
			}
			objects = append(objects, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: "default", UID: types.UID("pod-" + name), CreationTimestamp: metav1.NewTime(epoch), Annotations: annotations,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app", UID: "replicaset-app", Controller: lo.ToPtr(true)}},
				},
				Spec: corev1.PodSpec{
					NodeName:   n.Name,
					Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Requests: requests}}},
				},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				},
			})
		}
	}
	return objects, nil
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// consolidationWorld is one world's cluster with Karpenter's disruption machinery over it.
type consolidationWorld struct {
	ctx         context.Context
	kubeClient  client.Client
	cluster     *state.Cluster
	provisioner *provisioning.Provisioner
	cp          cloudprovider.CloudProvider
	recorder    *recorder
	queue       *disruption.Queue
	clock       *clocktesting.FakeClock
	candidates  map[string]*disruption.Candidate
	// evaluator is Balanced consolidation's, over the NodePool totals GetCandidatesWithTotals computed
	// (the disruption controller's SetNodePoolTotals): it approves every command of other pools.
	evaluator disruption.Evaluator
	// close ends the world: deletes its objects from the apiserver (nothing for the fake client).
	close func() error
}

// podsByNode serves the pod lists Karpenter asks for by node (MatchingFields spec.nodeName, the
// field its operator indexes, and nothing else) from the case's pods, as the informer cache Karpenter
// reads through serves them from its index; every other call goes to the fake client. The fake
// client's own List round-trips every pod of the cluster through JSON on each call, and Karpenter
// lists a node's pods per node several times per case: that was most of the judge's time. Nothing
// writes pods while a case runs (consolidation only simulates), so the snapshot stays true.
type podsByNode struct {
	client.Client
	pods map[string][]*corev1.Pod
}

func (c *podsByNode) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if out, ok := list.(*corev1.PodList); ok {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if o.FieldSelector != nil && o.LabelSelector == nil && o.Namespace == "" && o.Limit == 0 && o.Continue == "" &&
			len(o.FieldSelector.Requirements()) == 1 {
			if node, ok := o.FieldSelector.RequiresExactMatch("spec.nodeName"); ok {
				out.Items = make([]corev1.Pod, 0, len(c.pods[node]))
				for _, p := range c.pods[node] {
					out.Items = append(out.Items, *p.DeepCopy())
				}
				return nil
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

func newConsolidationWorld(ctx context.Context, w world, objects []client.Object) (*consolidationWorld, error) {
	cfg, direct, err := apiServerConfig()
	if err != nil {
		return nil, err
	}
	var kubeClient client.Client
	closeWorld := func() error { return nil }
	if cfg != nil {
		// The cross-check's store: the kit's kube-apiserver and etcd (apiserver_store.go).
		kubeClient, closeWorld, err = apiServerWorld(ctx, cfg, direct, objects)
		if err != nil {
			return nil, err
		}
	} else {
		copies := lo.Map(objects, func(o client.Object, _ int) client.Object { return o.DeepCopyObject().(client.Object) })
		fakeClient := withIndexers(fake.NewClientBuilder().
			WithScheme(clusterScheme).
			WithTypeConverters(managedfields.NewDeducedTypeConverter()).
			WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}, &corev1.Node{}, &corev1.Pod{}).
			WithObjects(copies...)).
			Build()
		// The pods as the fake client holds them (resourceVersion and all), by node.
		allPods := &corev1.PodList{}
		if err := fakeClient.List(ctx, allPods); err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		byNode := map[string][]*corev1.Pod{}
		for i := range allPods.Items {
			p := &allPods.Items[i]
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
		kubeClient = &podsByNode{Client: fakeClient, pods: byNode}
	}
	cw, err := buildConsolidationWorld(ctx, w, objects, kubeClient)
	if err != nil {
		return nil, errors.Join(err, closeWorld())
	}
	cw.close = closeWorld
	return cw, nil
}

// buildConsolidationWorld is Karpenter's disruption machinery over a world's store.
func buildConsolidationWorld(ctx context.Context, w world, objects []client.Object, kubeClient client.Client) (*consolidationWorld, error) {
	clk := clocktesting.NewFakeClock(epoch)
	// As pkg/operator and the AWS provider's main wire it: the overlay decorator over the provider.
	cp := overlay.Decorate(managedCatalog{w.catalog}, kubeClient, w.store)
	cluster := state.NewCluster(clk, kubeClient, cp)
	clusterCost := cost.NewClusterCost(ctx, cp, kubeClient)
	rec := &recorder{}
	cw := &consolidationWorld{ctx: ctx, kubeClient: kubeClient, cluster: cluster, cp: cp, recorder: rec, clock: clk}
	// Cluster state learns the nodes and NodeClaims from its informers' Reconcile (the node's pods
	// are read with it), as Karpenter's tests do (ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated).
	nodeController := informer.NewNodeController(kubeClient, cluster)
	nodeClaimController := informer.NewNodeClaimController(kubeClient, cp, cluster, clusterCost)
	for _, o := range objects {
		var err error
		switch o.(type) {
		case *corev1.Node:
			_, err = nodeController.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		case *v1.NodeClaim:
			_, err = nodeClaimController.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
		if err != nil {
			return nil, fmt.Errorf("cluster state: %T %s: %w", o, o.GetName(), err)
		}
	}
	cw.provisioner = provisioning.NewProvisioner(kubeClient, rec, cp, cluster, clk, deviceallocation.NewController(kubeClient), virtualpods.NewVirtualPodCache(kubeClient))
	cw.queue = disruption.NewQueue(kubeClient, rec, cluster, clk, cw.provisioner)
	// As the disruption controller asks it, with its ClusterCost (fed above by the NodeClaim informer,
	// each offering priced by this world's overlays): the candidates and each NodePool's totals.
	candidates, totals, err := disruption.GetCandidatesWithTotals(ctx, cluster, kubeClient, rec, clk, cp,
		func(context.Context, *disruption.Candidate) bool { return true }, disruption.GracefulDisruptionClass, cw.queue, clusterCost)
	if err != nil {
		return nil, fmt.Errorf("GetCandidatesWithTotals: %w", err)
	}
	cw.candidates = lo.SliceToMap(candidates, func(c *disruption.Candidate) (string, *disruption.Candidate) { return c.Name(), c })
	cw.evaluator = disruption.NewBalancedEvaluator(totals, rec)
	rec.take()
	return cw, nil
}

// notCandidate is NewCandidate's own reason for leaving a node out.
func (cw *consolidationWorld) notCandidate(name string) string {
	nodePoolMap, itMap, err := disruption.BuildNodePoolMap(cw.ctx, cw.kubeClient, cw.cp)
	if err != nil {
		return err.Error()
	}
	pdbs, err := pdb.NewLimits(cw.ctx, cw.kubeClient)
	if err != nil {
		return err.Error()
	}
	for _, n := range cw.cluster.DeepCopyNodes() {
		if n.Name() != name {
			continue
		}
		_, err := disruption.NewCandidate(cw.ctx, cw.kubeClient, cw.recorder, cw.clock, n, pdbs, nodePoolMap, itMap, cw.queue, disruption.GracefulDisruptionClass)
		cw.recorder.take()
		if err != nil {
			return err.Error()
		}
		return "NewCandidate accepted it, GetCandidates did not"
	}
	return "no such node in cluster state"
}

// simulate is disruption.SimulateScheduling as computeConsolidation calls it (drift: as
// Drift.ComputeCommands does, with no scheduling options). v1.15 added a SimulationOptions argument
// before the candidates; both pass its zero value.
func (cw *consolidationWorld) simulate(candidates []*disruption.Candidate, drift bool) (pscheduling.Results, error) {
	f := reflect.ValueOf(disruption.SimulateScheduling)
	t := f.Type()
	opts := []pscheduling.Options{pscheduling.IsConsolidationSimulation}
	if drift {
		opts = nil
	}
	args := []reflect.Value{
		reflect.ValueOf(cw.ctx), reflect.ValueOf(cw.kubeClient), reflect.ValueOf(cw.cluster), reflect.ValueOf(cw.provisioner),
		reflect.ValueOf(cw.clock), reflect.ValueOf(events.Recorder(cw.recorder)),
		reflect.ValueOf(opts),
	}
	for len(args) < t.NumIn()-1 {
		args = append(args, reflect.Zero(t.In(len(args))))
	}
	args = append(args, reflect.ValueOf(candidates))
	out := f.CallSlice(args)
	err, _ := out[1].Interface().(error)
	return out[0].Interface().(pscheduling.Results), err
}

func (cw *consolidationWorld) command(names []string) worldCommand {
	candidates := make([]*disruption.Candidate, 0, len(names))
	for _, name := range names {
		c, ok := cw.candidates[name]
		if !ok {
			return worldCommand{Decision: "none", Reason: fmt.Sprintf("not a candidate: %s", cw.notCandidate(name))}
		}
		candidates = append(candidates, c)
	}
	cw.recorder.take()
	cmd, err := disruption.JudgeComputeConsolidation(cw.ctx, cw.clock, cw.cluster, cw.kubeClient, cw.provisioner, cw.cp, cw.recorder, cw.queue, candidates...)
	evts := cw.recorder.take()
	if err != nil {
		return worldCommand{Decision: "none", Error: fmt.Sprintf("computeConsolidation: %v", err)}
	}
	out := worldCommand{Reason: unconsolidatable(evts)}
	switch cmd.Decision() {
	case disruption.ReplaceDecision:
		out.Decision = "replace"
		out.Reason = ""
		out.CandidatePrice = disruption.JudgeCandidatePrice(candidates...)
		if len(cmd.Replacements) != 1 {
			out.Error = fmt.Sprintf("%d replacements", len(cmd.Replacements))
			return out
		}
		r := cmd.Replacements[0]
		if len(candidates) > 1 {
			// firstNConsolidationOption: the error is checked before the options, as there.
			filtered, err := disruption.JudgeFilterOutSameInstanceType(r, candidates)
			if err != nil || len(filtered.InstanceTypeOptions) == 0 {
				out.Decision = "none"
				out.Reason = "filterOutSameInstanceType: no option left"
				if err != nil {
					out.Reason = fmt.Sprintf("filterOutSameInstanceType: %v", err)
				}
				return out
			}
			r = filtered
		}
		names := lo.Map(r.InstanceTypeOptions, func(it *cloudprovider.InstanceType, _ int) string { return it.Name })
		nodeClaim := r.ToNodeClaim()
		reqs := slices.Clone(nodeClaim.Spec.Requirements)
		slices.SortFunc(reqs, func(a, b v1.NodeSelectorRequirementWithMinValues) int { return strings.Compare(a.Key, b.Key) })
		out.Replacement = &replacementOut{
			NodePool: r.NodePoolName, Requirements: reqs, Requests: nodeClaim.Spec.Resources.Requests, InstanceTypes: names,
			PriceOverlayApplied: nodeClaim.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] == "true",
		}
		out.Balanced = cw.approve(cmd, candidates)
	case disruption.DeleteDecision:
		out.Decision = "delete"
		out.Reason = ""
	default:
		out.Decision = "none"
		// Whether computeConsolidation got as far as comparing prices: every pod scheduled, onto
		// exactly one new NodeClaim (consolidation.go: the lines before sumCandidatePrices).
		results, err := cw.simulate(candidates, false)
		cw.recorder.take()
		if err == nil && results.AllNonPendingPodsScheduled() && len(results.NewNodeClaims) == 1 {
			out.CandidatePrice = disruption.JudgeCandidatePrice(candidates...)
		}
	}
	return out
}

// drift is Drift.ComputeCommands' command for one drifted node: its pods scheduled without it
// (SimulateScheduling), a replacement for those that need a new node, no price test. A command
// whose pods do not all schedule is none (Karpenter publishes DisruptionBlocked); one that needs no
// new node deletes.
func (cw *consolidationWorld) drift(names []string) worldCommand {
	if len(names) != 1 {
		return worldCommand{Decision: "none", Error: "drift commands have one candidate"}
	}
	c, ok := cw.candidates[names[0]]
	if !ok {
		return worldCommand{Decision: "none", Reason: fmt.Sprintf("not a candidate: %s", cw.notCandidate(names[0]))}
	}
	results, err := cw.simulate([]*disruption.Candidate{c}, true)
	cw.recorder.take()
	if err != nil {
		return worldCommand{Decision: "none", Error: fmt.Sprintf("SimulateScheduling: %v", err)}
	}
	if !results.AllNonPendingPodsScheduled() {
		return worldCommand{Decision: "none", Reason: "its pods do not all schedule without it"}
	}
	switch len(results.NewNodeClaims) {
	case 0:
		return worldCommand{Decision: "delete"}
	case 1:
	default:
		return worldCommand{Decision: "none", Reason: fmt.Sprintf("%d replacements", len(results.NewNodeClaims))}
	}
	r := results.NewNodeClaims[0]
	nodeClaim := r.ToNodeClaim()
	reqs := slices.Clone(nodeClaim.Spec.Requirements)
	slices.SortFunc(reqs, func(a, b v1.NodeSelectorRequirementWithMinValues) int { return strings.Compare(a.Key, b.Key) })
	return worldCommand{
		Decision:       "replace",
		CandidatePrice: disruption.JudgeCandidatePrice(c),
		Replacement: &replacementOut{
			NodePool: r.NodePoolName, Requirements: reqs, Requests: nodeClaim.Spec.Resources.Requests,
			InstanceTypes:       lo.Map(r.InstanceTypeOptions, func(it *cloudprovider.InstanceType, _ int) string { return it.Name }),
			PriceOverlayApplied: nodeClaim.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] == "true",
		},
	}
}

// approve is Balanced consolidation's scoring of the command as the methods call it:
// SingleNodeConsolidation's CanPassThreshold then ApproveCommand (which publishes the
// ConsolidationApproved Events of a one-node command), MultiNodeConsolidation's ApproveCommand
// and, for the command it returns, EmitMultiNodeEvents. nil where no candidate's NodePool is Balanced.
func (cw *consolidationWorld) approve(cmd disruption.Command, candidates []*disruption.Candidate) *balancedOut {
	if !lo.SomeBy(candidates, func(c *disruption.Candidate) bool { return c.NodePool.Spec.Disruption.ConsolidationPolicy.IsBalanced() }) {
		return nil
	}
	cw.recorder.take()
	out := &balancedOut{Approvals: map[string]string{}}
	if len(candidates) == 1 && !cw.evaluator.CanPassThreshold(candidates[0]) {
		return out
	}
	approved, perPool := cw.evaluator.ApproveCommand(cw.ctx, cmd)
	if approved && len(candidates) > 1 {
		cw.evaluator.EmitMultiNodeEvents(cw.ctx, cmd, perPool, true)
	}
	out.Approved = approved
	for _, e := range cw.recorder.take() {
		if e.Reason != events.ConsolidationApproved {
			continue
		}
		switch o := e.InvolvedObject.(type) {
		case *v1.NodeClaim:
			out.Approvals[o.Labels[v1.NodePoolLabelKey]] = e.Message
		case *v1.NodePool:
			out.Approvals[o.Name] = e.Message
		}
	}
	return out
}

func judgeConsolidation(ctx context.Context, req consolidateRequest) (consolidateAnswer, error) {
	if err := unique(request{
		InstanceTypes: req.InstanceTypes, Overlays: req.Overlays,
		NodePools: lo.Map(req.NodePools, func(np consolidateNodePoolIn, _ int) nodePoolIn { return np.nodePoolIn }),
	}); err != nil {
		return consolidateAnswer{}, badRequest{err}
	}
	if dup := lo.FindDuplicates(lo.Map(req.Nodes, func(n consolidateNodeIn, _ int) string { return n.Name })); len(dup) > 0 {
		return consolidateAnswer{}, badRequest{fmt.Errorf("node %q appears more than once", dup[0])}
	}
	nodes := lo.SliceToMap(req.Nodes, func(n consolidateNodeIn) (string, bool) { return n.Name, true })
	for i, c := range req.Commands {
		if len(c) == 0 {
			return consolidateAnswer{}, badRequest{fmt.Errorf("command %d names no node", i)}
		}
		for _, name := range c {
			if !nodes[name] {
				return consolidateAnswer{}, badRequest{fmt.Errorf("command %d: no node %q", i, name)}
			}
		}
	}
	objects, err := clusterObjects(req)
	if err != nil {
		return consolidateAnswer{}, err
	}
	ctx = coreoptions.ToContext(ctx, coretest.Options(coretest.OptionsFields{FeatureGates: coretest.FeatureGates{
		NodeOverlay: lo.ToPtr(true), SpotToSpotConsolidation: lo.ToPtr(req.SpotToSpot),
	}}))
	pools := lo.Map(req.NodePools, func(np consolidateNodePoolIn, _ int) nodePoolIn { return np.nodePoolIn })
	real := func(_ int, o overlayIn) (*string, *string) { return o.Price, o.PriceAdjustment }
	withW, err := reconcileWorld(ctx, req.InstanceTypes, pools, req.Overlays, real)
	if err != nil {
		return consolidateAnswer{}, err
	}
	withoutW, err := reconcileWorld(ctx, req.InstanceTypes, pools, lo.Filter(req.Overlays, func(o overlayIn, _ int) bool { return !o.Selected }), real)
	if err != nil {
		return consolidateAnswer{}, err
	}
	out := consolidateAnswer{Statuses: withW.statuses, StatusesWithout: withoutW.statuses, Commands: make([]commandAnswer, len(req.Commands))}
	if withW.err != "" || withoutW.err != "" {
		out.Error = withW.err + withoutW.err
		return out, nil
	}
	// One world after the other: over the apiserver, only one world's objects exist at a time.
	for _, wc := range []struct {
		w   world
		set func(*commandAnswer, worldCommand)
	}{
		{withW, func(a *commandAnswer, c worldCommand) { a.With = c }},
		{withoutW, func(a *commandAnswer, c worldCommand) { a.Without = c }},
	} {
		cw, err := newConsolidationWorld(ctx, wc.w, objects)
		if err != nil {
			out.Error = err.Error()
			return out, nil
		}
		for i, c := range req.Commands {
			if req.Drift {
				wc.set(&out.Commands[i], cw.drift(c))
			} else {
				wc.set(&out.Commands[i], cw.command(c))
			}
		}
		if err := cw.close(); err != nil {
			return out, err
		}
	}
	return out, nil
}
