//go:build unix

package main

import (
	"context"
	"errors"
)

// errRunKeyWindows is what the Run key's parts answer off Windows, where
// platformFor never gives the Run key platform for this OS.
var errRunKeyWindows = errors.New("the Run key is Windows's")

// newRunKey is no registry: there is none here.
func newRunKey() runKey { return noRunKey{} }

type noRunKey struct{}

func (noRunKey) get(string) (string, error)                   { return "", errRunKeyWindows }
func (noRunKey) set(string, string) error                     { return errRunKeyWindows }
func (noRunKey) remove(string) error                          { return errRunKeyWindows }
func (noRunKey) disabled(string) (bool, error)                { return false, errRunKeyWindows }
func endFlyd(context.Context, func(string) string, int) error { return errRunKeyWindows }
