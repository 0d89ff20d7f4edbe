"""The PyTorch side of the tutorial pipeline benchmark (run_gpu_session.sh
trainpipe): ResNet-50 on one GPU, the tutorial's layer2/layer3 cut, its
pipeline at three split sizes and DDP, at one batch and image size, with
../shared/bench/torch_baselines.py (copied to .device/ by pack_device.sh).

  tutorial_baselines.py BATCH HW
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", ".device"))
import torch_baselines as tb  # noqa: E402

if __name__ == "__main__":
    batch, hw = int(sys.argv[1]), int(sys.argv[2])
    tag = dict(batch=batch, hw=hw)
    m = tb.models.resnet50(num_classes=1000).cuda(0)
    s = tb.train_steps(m, batch, hw, 10)
    del m
    tb.emit(what="train", strategy="single-gpu", gpus=1, step_s=s,
            img_s=batch / s, **tag)
    if tb.NGPU >= 2:
        m = tb.ModelParallelResNet50()
        s = tb.train_steps(m, batch, hw, 10)
        del m
        tb.emit(what="train", strategy="naive-model-parallel", gpus=2,
                step_s=s, img_s=batch / s, **tag)
        for split in [batch // 8, batch // 4, batch // 2]:
            m = tb.PipelineParallelResNet50(split_size=split)
            s = tb.train_steps(m, batch, hw, 10)
            del m
            tb.emit(what="train", strategy="pipeline-tutorial", split=split,
                    gpus=2, step_s=s, img_s=batch / s, **tag)
        tb.torch.cuda.empty_cache()
        tb.bench_ddp(batch, hw, 10, 2)
