// The field's way to watch node metadata, as a reference for `scale`: client-go's metadata client
// and a shared informer (what controller-runtime's metadata-only cache is built on), doing nothing
// with the events. Run beside the watcher on the same events, it tells what the Kubernetes
// project's own client costs per event on this machine. Prints "watch ended" on stderr each time
// it has to open a watch again.
package main

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodes := metadata.NewForConfigOrDie(config).Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"})
	watches := 0
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			if watches++; watches > 1 {
				fmt.Fprintln(os.Stderr, "watch ended")
			}
			return nodes.Watch(ctx, options)
		},
	}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	// A handler, as a controller has: the informer hands it every update.
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {}}); err != nil {
		panic(err)
	}
	informer.RunWithContext(context.Background())
}
