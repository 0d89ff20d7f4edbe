#!/usr/bin/env python3
"""Emulates the index arithmetic of FewChannelConv.cu's form 1 ("rows") on the CPU.

The window and filter staging, the lanes' tap masks and base offsets, the
ldmatrix row addresses and the mma.m16n8k16 fragment layouts (PTX ISA) are
re-enacted in numpy for small geometries and the result compared with a
direct convolution; the kernel's own check is GpuKernels.
FewChannelConvolutionMatchesCpu on a GPU. Written when form 1 could not be
run on one (session 45); a tool, never a test: it does not follow the kernel
when the kernel changes. Usage: python3 bench/few_channel_rows_emulate.py
"""
import numpy as np


def conv_ref(x, w, S, P):
    n,h,wd,c = x.shape; k,kh,kw,_ = w.shape
    oh=(h+2*P-kh)//S+1; ow=(wd+2*P-kw)//S+1
    xp=np.zeros((n,h+2*P,wd+2*P,c)); xp[:,P:P+h,P:P+wd,:]=x
    y=np.zeros((n,oh,ow,k))
    for i in range(oh):
        for j in range(ow):
            patch=xp[:,i*S:i*S+kh,j*S:j*S+kw,:]
            y[:,i,j,:]=np.einsum('nabc,kabc->nk',patch,w)
    return y
def run(n,h,wd,c,k,K,S,P,seed=0):
    rng=np.random.default_rng(seed)
    x=rng.integers(-3,4,(n,h,wd,c)).astype(float)
    w=rng.integers(-3,4,(k,K,K,c)).astype(float)
    ref=conv_ref(x,w,S,P)
    oh,ow=ref.shape[1:3]
    taps=K*K*c; rowTaps=K*c; rowLead=(P*c)%2; rowPadded=(rowTaps+rowLead+15)//16*16
    Rows=rowPadded//16
    filterPitch=K*rowPadded+8
    warps=min(4,(ow+31)//32); ppb=warps*32; seg=(ow+ppb-1)//ppb
    windowCols=(ppb-1)*S+K
    windowPitch=(windowCols*c+14)//8*8+rowPadded
    assert (S*c)%2==0
    xf=x.reshape(-1); inputRow=wd*c
    y=np.full(ref.shape, np.nan)
    for cg in range((k+63)//64):
        ch0=cg*64; chans=min(64,k-ch0)
        filt=np.zeros(64*filterPitch)
        for o in range(64):
            for t in range(K*rowPadded):
                kh=t//rowPadded; j=t-kh*rowPadded-rowLead
                src = kh*rowTaps+j if (0<=j<rowTaps) else taps
                if o<chans and src<taps:
                    filt[o*filterPitch+t]=w[ch0+o].reshape(-1)[src]
        real=lambda j: rowLead<=j<rowLead+rowTaps
        for img in range(n):
          for oy in range(oh):
            for s_ in range(seg):
                ox0=s_*ppb
                column0=(ox0*S-P)*c
                shift=column0%8
                chunk0=column0-shift
                win=np.zeros(K*windowPitch)
                for kh in range(K):
                    iy=oy*S-P+kh
                    for e in range(windowPitch):
                        col=chunk0+e
                        if 0<=iy<h and 0<=col<inputRow:
                            win[kh*windowPitch+e]=xf[(img*h+iy)*inputRow+col]
                for warp in range(warps):
                    pixel0=warp*32
                    if ox0+pixel0>=ow: continue
                    acc=np.zeros((2,8,16,8))  # m, n-tile, C matrix 16x8
                    for kh in range(K):
                        inputs=kh*windowPitch
                        for r in range(Rows):
                            # assemble A matrices per m from lanes
                            A=np.zeros((2,16,16))
                            for L in range(32):
                                G,Q=L//4,L%4
                                j=16*r+Q*2
                                lowm=(real(j),real(j+1)); highm=(real(j+8),real(j+9))
                                for m in range(2):
                                    for hh in range(2):
                                        base=shift-rowLead+(pixel0+m*16+G+hh*8)*S*c
                                        assert base%2==0 and base>=0
                                        for half,(jj,mk) in enumerate([(j,lowm),(j+8,highm)]):
                                            idx=inputs+base+jj
                                            assert idx+1 < K*windowPitch, (idx, K*windowPitch)
                                            v0=win[idx] if mk[0] else 0.0
                                            v1=win[idx+1] if mk[1] else 0.0
                                            row=G+hh*8; colk=2*Q+half*8
                                            A[m,row,colk]=v0; A[m,row,colk+1]=v1
                            for t in range(4):
                                # ldmatrix: lane address
                                addrs=[]
                                for L in range(32):
                                    fl=((L//16)*8+L%8)*filterPitch+(L//8)%2*8
                                    addrs.append(kh*rowPadded+fl+t*16*filterPitch+16*r)
                                Bm=[np.zeros((16,8)),np.zeros((16,8))]
                                for L in range(32):
                                    G,Q=L//4,L%4
                                    regs=[]
                                    for mi in range(4):
                                        a=addrs[mi*8+G]
                                        regs.append((filt[a+2*Q],filt[a+2*Q+1]))
                                    # b[0],b[1] -> tile 2t ; b[2],b[3] -> tile 2t+1
                                    for tt,(b0,b1) in enumerate([(regs[0],regs[1]),(regs[2],regs[3])]):
                                        Bm[tt][2*Q,G]=b0[0]; Bm[tt][2*Q+1,G]=b0[1]
                                        Bm[tt][2*Q+8,G]=b1[0]; Bm[tt][2*Q+9,G]=b1[1]
                                for m in range(2):
                                    acc[m,2*t]+=A[m]@Bm[0]
                                    acc[m,2*t+1]+=A[m]@Bm[1]
                    for m in range(2):
                        for row in range(16):
                            ox=ox0+pixel0+m*16+row
                            if ox>=ow: continue
                            for nt in range(chans//8):
                                y[img,oy,ox,ch0+nt*8:ch0+nt*8+8]=acc[m,nt,row]
    err=np.nanmax(np.abs(y-ref)); nanc=np.isnan(y).sum()
    print((n,h,wd,c,k,K,S,P),"max err",err,"unset",nanc, "Rows",Rows,"lead",rowLead)
    return err==0 and nanc==0
if __name__ == "__main__":
    # ResNet's stem (lead 1, two steps a row), stride-2 3 x 3 over one
    # channel, ConvNeXt's patchify (96 channels: a partial second group), a
    # 4-channel 5 x 5, two channels, and rows of two segments.
    cases = [(1, 9, 40, 3, 64, 7, 2, 3), (1, 6, 9, 1, 24, 3, 2, 1),
             (1, 8, 20, 3, 96, 4, 4, 0), (1, 7, 12, 4, 8, 5, 1, 2),
             (1, 7, 12, 2, 40, 3, 2, 0), (1, 5, 300, 3, 16, 3, 2, 1),
             (1, 9, 270, 3, 64, 7, 2, 3)]
    results = [run(*case) for case in cases]
    print("OK" if all(results) else "FAIL")
    raise SystemExit(0 if all(results) else 1)
