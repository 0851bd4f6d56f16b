package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
)

// world is what Karpenter's NodeOverlay controller made of one set of overlays: the statuses it
// wrote and the store that prices each NodePool's instance types. err is set when its Reconcile
// failed (the store is then not to be used).
type world struct {
	statuses map[string]statusOut
	store    *nodeoverlay.InstanceTypeStore
	catalog  *catalog
	err      string
}

// overlayPrice says what an overlay's spec carries as price and priceAdjustment (i is its index).
type overlayPrice func(i int, o overlayIn) (price, priceAdjustment *string)

// reconcileWorld runs the controller's Reconcile once over these NodePools and overlays, as
// Karpenter does, with the request's instance types as the cloud provider's catalog.
func reconcileWorld(ctx context.Context, its []instanceTypeIn, pools []nodePoolIn, overlays []overlayIn, priced overlayPrice) (world, error) {
	objects := make([]client.Object, 0, len(pools)+len(overlays))
	for _, np := range pools {
		objects = append(objects, &v1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: np.Name, Generation: 1},
			Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{
				ObjectMeta: v1.ObjectMeta{Labels: np.Labels},
				Spec: v1.NodeClaimTemplateSpec{
					Requirements: np.Requirements,
					NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				},
			}},
		})
	}
	for i, o := range overlays {
		spec := v1alpha1.NodeOverlaySpec{Requirements: o.Requirements, Weight: o.Weight, Capacity: o.Capacity}
		if o.Price != nil || o.PriceAdjustment != nil {
			spec.Price, spec.PriceAdjustment = priced(i, o)
		}
		generation := int64(1)
		if o.Generation != nil {
			generation = *o.Generation
		}
		objects = append(objects, &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Generation: generation}, Spec: spec})
	}
	kubeClient := fake.NewClientBuilder().
		WithScheme(karpenterScheme).
		WithTypeConverters(managedfields.NewDeducedTypeConverter()).
		WithStatusSubresource(&v1alpha1.NodeOverlay{}).
		WithObjects(objects...).
		Build()
	clk := clocktesting.NewFakeClock(epoch)
	cp := &catalog{its: instanceTypes(its)}
	store := nodeoverlay.NewInstanceTypeStore()
	controller := nodeoverlay.NewController(clk, kubeClient, cp, store, state.NewCluster(clk, kubeClient, cp))

	w := world{statuses: map[string]statusOut{}, store: store, catalog: cp}
	result, err := controller.Reconcile(ctx, reconcile.Request{})
	if err == nil && result.Requeue { //nolint:staticcheck // Reconcile asks for a requeue this way
		err = errors.New("Reconcile asked to be requeued: the store was not updated")
	}
	if err != nil {
		w.err = err.Error()
	}
	list := &v1alpha1.NodeOverlayList{}
	if err := kubeClient.List(ctx, list); err != nil {
		return world{}, fmt.Errorf("listing nodeoverlays back: %w", err)
	}
	for _, o := range list.Items {
		conditions := make([]conditionOut, 0, len(o.Status.Conditions))
		for _, c := range o.Status.Conditions {
			conditions = append(conditions, conditionOut{
				Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
				ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime.UTC().Format(time.RFC3339),
			})
		}
		w.statuses[o.Name] = statusOut{Conditions: conditions}
	}
	return w, nil
}
