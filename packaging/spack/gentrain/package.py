# Spack recipe for gentrain, built from its release tarball (`make dist`). There is no
# public download yet: put gentrain-0.1.0.tar.gz as gentrain/gentrain-0.1.0.tar.gz in a
# folder and `spack mirror add local file://FOLDER`. Use the recipe from a repository
# of your own:
#   spack repo create myrepo && cp -r packaging/spack/gentrain myrepo/packages/
# The sha256 below stays all zeros until a release: packaging/set-checksums.sh writes
# the released tarball's (a tarball made again differs: it holds its build time).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Gentrain(AutotoolsPackage):
    """GPT trainer for HPC clusters: MPI ranks (data, tensor and pipeline parallel),
    OpenMP threads with AVX-512/AVX2 kernels and OpenBLAS, training data read from
    HDF5 files, exact checkpoints, Slurm and PBS job scripts, optional CUDA FP16."""

    homepage = "https://example.invalid/gentrain"
    url = "https://example.invalid/gentrain/gentrain-0.1.0.tar.gz"

    version("0.1.0", sha256="0000000000000000000000000000000000000000000000000000000000000000")

    # configure: --with-cuda=DIR (nvcc, cudart, cuBLAS under DIR), and with it
    # --with-nccl / --without-nccl for the tensor-parallel all-reduces on the GPUs.
    variant("cuda", default=False, description="Build the CUDA FP16 offload (--with-cuda)")
    variant(
        "nccl",
        default=True,
        when="+cuda",
        description="Tensor-parallel all-reduces over NCCL on the GPUs (--with-nccl)",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build", when="+cuda")
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    # The OpenMP build: the pthread one's own thread pool fights gentrain's threads.
    depends_on("openblas threads=openmp")
    depends_on("hdf5+mpi")
    depends_on("cuda@12:", when="+cuda")
    depends_on("nccl", when="+nccl")

    def setup_build_environment(self, env):
        # configure wants the MPI compiler as CC.
        env.set("CC", self.spec["mpi"].mpicc)

    def configure_args(self):
        spec = self.spec
        args = [
            "BLAS_CFLAGS={0}".format(spec["openblas"].headers.cpp_flags),
            "BLAS_LIBS={0}".format(spec["openblas"].libs.ld_flags),
            "HDF5_CFLAGS={0}".format(spec["hdf5"].headers.cpp_flags),
            "HDF5_LIBS={0}".format(spec["hdf5"].libs.ld_flags),
        ]
        if spec.satisfies("+cuda"):
            args.append("--with-cuda={0}".format(spec["cuda"].prefix))
            if spec.satisfies("+nccl"):
                # configure links -lnccl and nvcc includes nccl.h: show both where
                # Spack put NCCL.
                nccl = spec["nccl"]
                args.append("--with-nccl")
                args.append("LDFLAGS={0} -Wl,-rpath,{1}".format(
                    nccl.libs.search_flags, nccl.prefix.lib))
                args.append(
                    "NVCCFLAGS=-O2 -gencode arch=compute_80,code=sm_80 "
                    "-gencode arch=compute_90,code=sm_90 "
                    "-gencode arch=compute_90,code=compute_90 {0}".format(
                        nccl.headers.cpp_flags))
            else:
                args.append("--without-nccl")
        else:
            args.append("--without-cuda")
        return args
