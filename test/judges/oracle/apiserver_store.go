// The consolidation judge's second store: a real kube-apiserver and etcd (the kit's), named by the
// judge process's environment variable VENEER_JUDGE_KUBECONFIG (a kubeconfig file, admin). Used by
// test/judges/consolidation-envtest.test.ts to cross-check the fake-client store
// (consolidate.go, newConsolidationWorld) on a sample of cases; see the header of consolidate.go.
//
// Per world: the world's objects are written as Karpenter's envtest-based tests write them
// (pkg/test/expectations ExpectApplied: Create, then Status().Update with the object's status), then
// read through a controller-runtime client whose reads come from an informer cache with the field
// indexes Karpenter's operator registers (pkg/operator setupIndexers), as Karpenter's own
// test.NewEnvironment builds one when field indexers are asked for (pkg/test/environment.go, a
// client.New with a cache.New reader); after the world's commands everything is deleted (finalizers
// removed first, pods with a zero grace period) and the judge waits until the apiserver lists none,
// so that the next world starts from an empty cluster. Nodes, NodeClaims and NodePools are
// cluster-scoped: worlds over the apiserver run one at a time (apiServerStore.mu).
//
// One step of a real cluster's controllers is taken here, since no kube-controller-manager runs
// beside the kit's apiserver: the apiserver's TaintNodesByCondition admission plugin taints every
// new Node node.kubernetes.io/not-ready:NoSchedule, and the node lifecycle controller removes that
// taint once the Node is Ready. The world's Nodes are Ready, so the taint is removed (an Update of
// the Node's spec) before their status is written. Everything else is what the apiserver makes of
// the objects: its defaults (CRD defaults such as expireAfter, pods' defaults and admission-added
// tolerations, QoS class), its UIDs, creation timestamps, generations and resource versions.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// apiServerKubeconfigEnv names the kubeconfig of the apiserver the consolidation worlds are stored in.
const apiServerKubeconfigEnv = "VENEER_JUDGE_KUBECONFIG"

// apiServerStore is the process's apiserver, when VENEER_JUDGE_KUBECONFIG names one.
var apiServerStore = struct {
	once   sync.Once
	cfg    *rest.Config
	direct client.Client
	err    error
	// One world at a time: the cluster-scoped objects of two worlds would meet.
	mu sync.Mutex
}{}

// apiServerConfig is the apiserver's client config, or nil when the judge uses the fake client.
func apiServerConfig() (*rest.Config, client.Client, error) {
	path := os.Getenv(apiServerKubeconfigEnv)
	if path == "" {
		return nil, nil, nil
	}
	s := &apiServerStore
	s.once.Do(func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			s.err = fmt.Errorf("%s=%s: %w", apiServerKubeconfigEnv, path, err)
			return
		}
		// No client-side throttling (Karpenter's operator raises it too: --kube-client-qps).
		cfg.QPS, cfg.Burst = 1000, 2000
		s.cfg = cfg
		s.direct, s.err = client.New(cfg, client.Options{Scheme: clusterScheme})
	})
	return s.cfg, s.direct, s.err
}

// The field indexes of Karpenter's operator (pkg/operator/operator.go setupIndexers), on the cache
// the world's client reads from; the same functions withIndexers gives the fake client.
func indexCache(ctx context.Context, c cache.Cache) error {
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }},
		{&corev1.Node{}, "spec.providerID", func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }},
		{&storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}},
		{&v1.NodeClaim{}, "status.providerID", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }},
		{&v1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Group} }},
		{&v1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Kind} }},
		{&v1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Name} }},
		{&v1.NodePool{}, "spec.template.spec.nodeClassRef.group", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Group}
		}},
		{&v1.NodePool{}, "spec.template.spec.nodeClassRef.kind", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Kind}
		}},
		{&v1.NodePool{}, "spec.template.spec.nodeClassRef.name", func(o client.Object) []string {
			return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Name}
		}},
	} {
		if err := c.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("index %T %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// apiServerWorld writes the world's objects to the apiserver and returns a cache-backed client over
// them, and the function that deletes them all and lets the next world in. On an error everything
// written so far is deleted already.
func apiServerWorld(ctx context.Context, cfg *rest.Config, direct client.Client, objects []client.Object) (client.Client, func() error, error) {
	s := &apiServerStore
	s.mu.Lock()
	cctx, cancel := context.WithCancel(ctx)
	done := func() error {
		cancel()
		err := wipeWorld(ctx, direct)
		s.mu.Unlock()
		return err
	}
	fail := func(err error) (client.Client, func() error, error) {
		return nil, nil, errors.Join(err, done())
	}
	// It must start empty: a world left behind (a judge killed mid-case) would join this one.
	if err := wipeWorld(ctx, direct); err != nil {
		return fail(err)
	}
	for _, o := range objects {
		if err := writeObject(ctx, direct, o); err != nil {
			return fail(fmt.Errorf("apiserver: %T %s: %w", o, o.GetName(), err))
		}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: clusterScheme})
	if err != nil {
		return fail(err)
	}
	if err := indexCache(cctx, c); err != nil {
		return fail(err)
	}
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		return fail(errors.New("apiserver: the cache did not sync"))
	}
	kubeClient, err := client.New(cfg, client.Options{Scheme: clusterScheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return fail(err)
	}
	return kubeClient, done, nil
}

// writeObject is ExpectApplied of a new object: Create, then Status().Update with its status (the
// apiserver drops a custom resource's and a pod's status on create); a Node first loses the taint
// TaintNodesByCondition gave it (see the header).
func writeObject(ctx context.Context, direct client.Client, o client.Object) error {
	obj := o.DeepCopyObject().(client.Object)
	withStatus := o.DeepCopyObject().(client.Object)
	// What only the apiserver sets.
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetGeneration(0)
	if err := direct.Create(ctx, obj); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if node, ok := obj.(*corev1.Node); ok {
		want := o.(*corev1.Node).Spec.Taints
		if len(node.Spec.Taints) != len(want) {
			node.Spec.Taints = want
			if err := direct.Update(ctx, node); err != nil {
				return fmt.Errorf("removing TaintNodesByCondition's taint: %w", err)
			}
		}
	}
	if pod, ok := withStatus.(*corev1.Pod); ok {
		// The apiserver computes the QoS class on create; a status update may not change it.
		pod.Status.QOSClass = obj.(*corev1.Pod).Status.QOSClass
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	withStatus.SetUID(obj.GetUID())
	withStatus.SetCreationTimestamp(obj.GetCreationTimestamp())
	withStatus.SetGeneration(obj.GetGeneration())
	if err := direct.Status().Update(ctx, withStatus); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// wipeWorld deletes every Pod (namespace default), NodeClaim, Node and NodePool, removing finalizers
// first, and waits until the apiserver lists none.
func wipeWorld(ctx context.Context, direct client.Client) error {
	kinds := []struct {
		list func() client.ObjectList
		obj  func() client.Object
		opts []client.DeleteAllOfOption
	}{
		{func() client.ObjectList { return &corev1.PodList{} }, func() client.Object { return &corev1.Pod{} },
			[]client.DeleteAllOfOption{client.InNamespace("default"), client.GracePeriodSeconds(0)}},
		{func() client.ObjectList { return &v1.NodeClaimList{} }, func() client.Object { return &v1.NodeClaim{} }, nil},
		{func() client.ObjectList { return &corev1.NodeList{} }, func() client.Object { return &corev1.Node{} }, nil},
		{func() client.ObjectList { return &v1.NodePoolList{} }, func() client.Object { return &v1.NodePool{} }, nil},
	}
	listed := func(k int) ([]client.Object, error) {
		list := kinds[k].list()
		var opts []client.ListOption
		if k == 0 {
			opts = append(opts, client.InNamespace("default"))
		}
		if err := direct.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		out := make([]client.Object, 0, len(items))
		for _, item := range items {
			out = append(out, item.(client.Object))
		}
		return out, nil
	}
	for k := range kinds {
		items, err := listed(k)
		if err != nil {
			return fmt.Errorf("wipe: list: %w", err)
		}
		for _, o := range items {
			if len(o.GetFinalizers()) == 0 {
				continue
			}
			patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
			o.SetFinalizers(nil)
			if err := direct.Patch(ctx, o, patch); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("wipe: removing finalizers of %s: %w", o.GetName(), err)
			}
		}
		if len(items) > 0 {
			if err := direct.DeleteAllOf(ctx, kinds[k].obj(), kinds[k].opts...); err != nil {
				return fmt.Errorf("wipe: delete: %w", err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for k := range kinds {
		for {
			items, err := listed(k)
			if err != nil {
				return fmt.Errorf("wipe: list: %w", err)
			}
			if len(items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("wipe: %d %T left (first %s)", len(items), items[0], items[0].GetName())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}
