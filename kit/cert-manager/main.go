// cert-manager for the local control plane: its own controllers and cainjector, from the
// library of github.com/cert-manager/cert-manager (whose cmd/* programs are separate modules the
// Go module proxy does not serve). Only what the chart uses runs: the Issuer controller with the
// SelfSigned and CA issuers, the Certificate controllers, the CertificateRequest approver and
// signers for those two issuers, and cainjector for webhook configurations. No leader election:
// one instance per test control plane.
//
//	cert-manager --kubeconfig FILE [-v N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	corev1 "k8s.io/api/core/v1"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/util"
	// The Issuer controller finds each issuer type's Setup by registration.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Upstream's default set, less ACME, Vault, Venafi, ClusterIssuers, the ingress and gateway
// shims and metrics: nothing in the chart needs them.
var controllers = []string{
	issuers.ControllerName,
	crapprover.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

func main() {
	// Not the global flag set: controller-runtime registers its own --kubeconfig there.
	flags := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the apiserver to serve")
	klog.InitFlags(flags)
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "usage: cert-manager --kubeconfig FILE [-v N]")
		os.Exit(2)
	}
	ctrl.SetLogger(klog.NewKlogr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var wg sync.WaitGroup
	run := func(name string, fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil {
				klog.ErrorS(err, "stopped", "component", name)
				os.Exit(1)
			}
		})
	}
	if err := startControllers(ctx, *kubeconfig, run); err != nil {
		klog.ErrorS(err, "controllers")
		os.Exit(1)
	}
	if err := startCAInjector(ctx, *kubeconfig, run); err != nil {
		klog.ErrorS(err, "cainjector")
		os.Exit(1)
	}
	klog.InfoS("cert-manager running", "controllers", controllers)
	wg.Wait()
}

func startControllers(ctx context.Context, kubeconfig string, run func(string, func() error)) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: "cert-manager"},
		CertificateOptions: controllerpkg.CertificateOptions{
			// Upstream waits an hour after a failed request; a test would only time out.
			CertificateRequestMinimumBackoffDuration: 5 * time.Second,
			CertificateRequestMaximumBackoffDuration: time.Minute,
		},
	})
	if err != nil {
		return err
	}
	for _, name := range controllers {
		construct, ok := controllerpkg.Known()[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered", name)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %q: %w", name, err)
		}
		run(name, func() error { return c.Run(2, ctx) })
	}
	// Informers are started after every controller has asked for its own; the Contexts that
	// Build returns share the factories.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	return nil
}

func startCAInjector(ctx context.Context, kubeconfig string, run func(string, func() error)) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// cainjector applies the CA with server-side apply, as the field manager its user agent names.
	config = util.RestConfigWithUserAgent(config, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// As upstream: Secrets are read directly and watched as metadata only.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	})
	if err != nil {
		return err
	}
	run("cainjector", func() error { return mgr.Start(ctx) })
	return nil
}
