# Sourced by the GPU-machine scripts in bench/ (after bench/pack_device.sh,
# carry .device): unpacks partc's binaries into $W and sets the library
# path to the lent machine's PyTorch wheels' CUDA 13, cuDNN, NCCL and
# cuBLAS. Sets W (work directory) and B (binaries).
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
W=/tmp/partc-gpu
mkdir -p $W && tar -C $W -xJf .device/partc-bin.tar.xz
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
B=$W/bin
