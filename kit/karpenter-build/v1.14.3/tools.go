//go:build tools

package tools

import (
	_ "github.com/aws/karpenter-provider-aws/cmd/controller"
	_ "sigs.k8s.io/karpenter/kwok"
)
