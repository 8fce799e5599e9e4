#!/usr/bin/env bash
# CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER) for GPU builds of emu/ with wgmma: runs the compiler
# command with the target -gencode=arch=compute_90,code=sm_90 replaced by the arch-specific
# -gencode=arch=compute_90a,code=sm_90a (wgmma needs sm_90a; the image runs only on compute capability 9.0,
# i.e. H100/H200). Used by tools/gpu_session.sh; a plain build keeps sm_90 and the mma.sync bf16-tc kernel.
args=()
for a in "$@"; do
  case "$a" in
    -gencode=arch=compute_90,code=sm_90) args+=("-gencode=arch=compute_90a,code=sm_90a") ;;
    *) args+=("$a") ;;
  esac
done
exec "${args[@]}"
